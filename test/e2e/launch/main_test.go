// Package launch is the end-to-end suite of one launch on the platform's bad days: Create returning
// on the decision, late and unclassified refusals, transient upstream errors, groups that never
// sync, dead launches given up, and flavors the platform refuses or retires. It runs on a simulated
// CKE of its own (harness.RunSuite), beside the other end-to-end packages; its scenarios run one
// after the other and each leaves nothing behind. `go test -short` skips it.
package launch

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/launch", func(e *stack.Env) { env = e }))
}
