// Package ownership is the end-to-end suite of the ownership proof: garbage collection reaps what
// it can prove is ours and refuses look-alikes and hand-made copies. It runs on a simulated CKE of
// its own (harness.RunSuite), beside the other end-to-end packages; its scenarios run one after the
// other and each leaves nothing behind. `go test -short` skips it.
package ownership

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/ownership", func(e *stack.Env) { env = e }))
}
