// Package configured is the end-to-end suite of a configured quota (settings.quota) changed at
// run time: the organisation's quota is raised and the configuration with it, and the pods
// waiting for the raised part get their NodeGroups at once, nothing remembered held against
// them and nothing refused. It runs on a simulated CKE of its own (harness.RunSuite), beside
// the other end-to-end packages. `go test -short` skips it.
package configured

import (
	"os"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/quota/configured", func(e *stack.Env) { env = e }))
}
