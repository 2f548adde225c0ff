// Package headroom is the end-to-end suite of the quota the controller knows or learns: configured
// and inferred headroom, freed quota used at once, refusal counting, and a refused resize that
// keeps charging the nodes that run.
//
// Like every quota package (headroom, probes, lowered, raised), it runs on a simulated CKE of its
// own (harness.RunSuite): its scenarios change what the other packages take as given — the
// platform's quota, the quota engine's quirks, and the controller's memory of both, which only a
// restart clears. Each scenario that teaches the controller something restarts it before and after
// (Scenario.FreshController), and the harness puts the operator's options back (and drops leaked
// reservations) at cleanup. `go test -short` skips it.
package headroom

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/quota/headroom", func(e *stack.Env) { env = e }))
}
