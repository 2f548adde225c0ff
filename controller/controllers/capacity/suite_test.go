package capacity_test

import (
	"context"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/capacity"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

var (
	env     *testenv.Env
	flavors *catalog.Catalog
)

// TestMain runs the capacity controller in a real manager against a real apiserver, as
// main.go wires it.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithManager(m, func(ctx context.Context, e *testenv.Env, mgr ctrl.Manager) error {
		env = e
		var err error
		if flavors, err = catalog.Load("", "par", logr.Discard()); err != nil {
			return err
		}
		return capacity.New(mgr.GetClient(), flavors).Register(ctx, mgr)
	}))
}
