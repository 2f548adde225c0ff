// Package provisioning is the end-to-end suite of launching nodes for pending pods: the cheapest
// flavor that fits, bin-packing, the labels a node carries, and the shipped examples that
// provision. It runs on a simulated CKE of its own (harness.RunSuite), beside the other end-to-end
// packages; its scenarios run one after the other and each leaves nothing behind. `go test -short`
// skips it.
package provisioning

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/provisioning", func(e *stack.Env) { env = e }))
}
