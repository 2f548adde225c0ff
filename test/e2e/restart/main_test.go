// Package restart is the end-to-end suite of the controller's own life: the leader lease released
// on SIGTERM, kept through an apiserver outage and given up safely past its renew deadline, a kill
// in the middle of a launch, bad configuration kept out, and a restart beside a group resized by
// hand. It runs on a simulated CKE of its own (harness.RunSuite), beside the other
// end-to-end packages; its scenarios run one after the other and each leaves nothing behind. `go
// test -short` skips it.
package restart

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/restart", func(e *stack.Env) { env = e }))
}
