// Package lowered is the end-to-end suite of a quota below CKE's default: refusals stay bounded
// while the controller learns the limit. It runs on a simulated CKE of its own (harness.RunSuite),
// beside the other end-to-end packages; its scenarios run one after the other and each leaves
// nothing behind. `go test -short` skips it.
package lowered

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/quota/lowered", func(e *stack.Env) { env = e }))
}
