// Package e2e is the end-to-end suite: the shipped bundle and controller binary on the
// simulated CKE (sim/stack), asserted with test/harness. Scenarios share one cluster, run one
// after the other and each leaves nothing behind. `go test -short` skips the suite.
package e2e

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e", func(e *stack.Env) { env = e }))
}
