// Package disruption is the end-to-end suite of taking nodes away: consolidation, drift, expiry,
// foreground deletion, and the disruption controls of the shipped examples (budgets,
// do-not-disrupt, PodDisruptionBudgets). It runs on a simulated CKE of its own (harness.RunSuite),
// beside the other end-to-end packages; its scenarios run one after the other and each leaves
// nothing behind. `go test -short` skips it.
package disruption

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/disruption", func(e *stack.Env) { env = e }))
}
