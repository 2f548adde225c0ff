// Package steering is the end-to-end suite of cost steering (issue 33): the provider hides, for
// one scheduling pass, the flavors whose packing would cost more for the pending pods, so that
// CPU-heavy pods land on small nodes instead of the large ones Karpenter core packs them onto.
// It proves that a pod needing a large flavor, or asking for one by node selector, still gets
// it; that the shipped setting is cheaper than steering off, which restores core's packing;
// and that a workload changing shape mid-run is steered to its new shape without replacing
// the nodes already running. Its scenarios raise the organisation quota, so that the bill
// alone steers, and restart the controller with cost steering off, and put both back; it runs
// on a simulated CKE of its own (harness.RunSuite). `go test -short` skips it.
package steering

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/steering", func(e *stack.Env) { env = e }))
}
