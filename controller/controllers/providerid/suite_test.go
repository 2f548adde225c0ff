package providerid_test

import (
	"context"
	"os"
	"testing"

	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/karpenter/pkg/events"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/providerid"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

var (
	env *testenv.Env
	// seen receives every event the stamper publishes.
	seen *record.FakeRecorder
)

// TestMain runs the provider-ID stamper in a real manager against a real apiserver, as
// main.go wires it.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithManager(m, func(ctx context.Context, e *testenv.Env, mgr ctrl.Manager) error {
		env = e
		seen = record.NewFakeRecorder(1000)
		return providerid.New(mgr.GetClient(), mgr.GetAPIReader(), events.NewRecorder(seen)).Register(ctx, mgr)
	}))
}
