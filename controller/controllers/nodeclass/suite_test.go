package nodeclass_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/nodeclass"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

var env *testenv.Env

// TestMain starts a real apiserver shared by the tests. Each test that needs the controller
// runs its own (startController), wired as it needs, so that no other copy with other prices
// writes the same classes' status meanwhile.
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
	return m.Run()
}

// startController runs the CleverNodeClass controller in a manager of its own until the test
// ends, as main.go wires it; prices is nil when the price refresher is off.
func startController(t *testing.T, prices nodeclass.Prices) {
	t.Helper()
	g := NewWithT(t)
	mgr, err := env.NewManager()
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	g.Expect(nodeclass.New(mgr.GetClient(), mgr.GetRESTMapper(), prices).Register(ctx, mgr)).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}
