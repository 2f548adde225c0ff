// Package uptake is the end-to-end suite of quota freed upstream: another cluster of the
// organisation scales down while pods wait, and the provider finds the room by itself, within
// its stated bound, on a platform whose leaks last longer than the simulator's default. It
// runs on a simulated CKE of its own (harness.RunSuite), beside the other end-to-end packages.
// `go test -short` skips it.
package uptake

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/quota/uptake", func(e *stack.Env) { env = e }))
}
