// Package topology is the end-to-end suite of the worker-only CKE topology: a simulated CKE with
// no control-plane Node and a pre-existing 2 × S worker NodeGroup Karpenter does not manage, as
// some live clusters show. The controller runs out of cluster (sim/stack), so the bundle's
// placement is proved by scheduling its Deployment's pod template on the simulated nodes. It
// runs on a simulated CKE of its own (harness.RunSuite); `go test -short` skips it.
package topology

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

// The pre-existing worker group, as the 2026-10-01 live run had it.
const (
	workerPool   = "workers"
	workerFlavor = "S"
	workerNodes  = 2
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/topology", func(e *stack.Env) { env = e }, harness.WorkerOnly(workerPool, workerFlavor, workerNodes)))
}
