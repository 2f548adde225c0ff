package capacity_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"

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
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	mgr, err := env.NewManager()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if flavors, err = catalog.Load("", "par", logr.Discard()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := capacity.New(mgr.GetClient(), flavors).Register(ctx, mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return m.Run()
}
