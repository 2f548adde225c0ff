// Package leader is the end-to-end suite of the quota memory across leaders: what the tracker
// learned survives a killed leader, so its successor sends no probe into a leak its
// predecessor knew of and locks nothing out longer. It runs on a simulated CKE of its own
// (harness.RunSuite), beside the other end-to-end packages. `go test -short` skips it.
package leader

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/quota/leader", func(e *stack.Env) { env = e }))
}
