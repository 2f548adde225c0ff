// Package raised is the end-to-end suite of a raised quota: it is climbed without refusals, and a
// refused XL does not collapse it for smaller flavors. It runs on a simulated CKE of its own
// (harness.RunSuite), beside the other end-to-end packages; its scenarios run one after the other
// and each leaves nothing behind. `go test -short` skips it.
package raised

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/quota/raised", func(e *stack.Env) { env = e }))
}
