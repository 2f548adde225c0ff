package providerid_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/tools/record"
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
	seen = record.NewFakeRecorder(1000)
	if err := providerid.New(mgr.GetClient(), mgr.GetAPIReader(), events.NewRecorder(seen)).Register(ctx, mgr); err != nil {
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
