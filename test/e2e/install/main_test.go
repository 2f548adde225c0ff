// Package install is the end-to-end suite of installing: the controller's pod admitted under the
// restricted Pod Security level, and the switch from the upstream provider. It runs on a simulated
// CKE of its own (harness.RunSuite), beside the other end-to-end packages; its scenarios run one
// after the other and each leaves nothing behind. `go test -short` skips it.
package install

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/install", func(e *stack.Env) { env = e }))
}
