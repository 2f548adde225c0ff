// Package inspect is the end-to-end suite of the binary's status and explain commands: the
// built binary, run as a user with the admin's kubeconfig against the simulated CKE, says why
// each pod of a real scenario waits (NodePool limits, the quota, a flavor the pool does not
// allow, a flavor the operator refused and the provider set aside) or where it runs, and what
// the provider sees. Its controller runs on a configured quota of 40 vCPU / 36 GB, so that
// the quota rules flavors out at once, without a refused launch or a leak to wait out. It runs
// on a simulated CKE of its own (harness.RunSuite), in under a minute. `go test -short` skips
// it.
package inspect

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

// quotaEnv is the controller's configured quota: with the two S control-plane nodes' 16 vCPU /
// 24 GB, room for 24 vCPU / 12 GB, and with one 2XS (4 / 4) running, 20 vCPU / 8 GB: an XS
// (6 / 8) fits, an M (10 / 16) does not.
var quotaEnv = map[string]string{"CLEVER_CLOUD_QUOTA_CPU": "40", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "36"}

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/inspect", func(e *stack.Env) { env = e }, func(o *stack.Options) { o.Env = quotaEnv }))
}
