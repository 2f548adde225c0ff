// Package repair is the end-to-end suite of NodeRepair: unhealthy nodes replaced after the
// toleration, within the unhealthy budget, and left alone with the gate off. It runs a controller
// linked with a 30 s toleration. It runs on a simulated CKE of its own (harness.RunSuite), beside
// the other end-to-end packages; its scenarios run one after the other and each leaves nothing
// behind. `go test -short` skips it.
package repair

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/repair", func(e *stack.Env) {
		env = e
		// The repair controller is built once, here, before any scenario's deadline starts; a
		// build error is kept and fails the first scenario that restarts on it.
		_, _ = e.RepairBinary()
	}))
}
