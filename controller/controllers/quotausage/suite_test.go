package quotausage_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotausage"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

var (
	env     *testenv.Env
	tracker *quota.Tracker
)

// TestMain runs the quota usage controller in a real manager against a real apiserver, as
// main.go wires it, feeding a tracker with a configured limit.
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
	flavors, err := catalog.Load("", "par", logr.Discard())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tracker = quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{CPU: 40, GB: 40})
	if err := quotausage.New(mgr.GetClient(), flavors, tracker).Register(ctx, mgr); err != nil {
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
