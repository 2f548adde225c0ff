package controllers_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/capacity"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/garbagecollection"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/nodeclass"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/providerid"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotausage"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/internal/testenv"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/go-logr/logr"
)

var (
	env     *testenv.Env
	kube    client.Client
	events  *record.FakeRecorder
	gc      *garbagecollection.Controller
	gcClock *clocktesting.FakeClock
	flavors *catalog.Catalog
	tracker *quota.Tracker
)

// TestMain runs the provider's controllers in a real manager against a real apiserver, as
// main.go wires them, except garbage collection, which tests drive pass by pass.
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
	events = record.NewFakeRecorder(1000)
	tracker = quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{CPU: 40, GB: 40})
	if flavors, err = catalog.Load("", "par", logr.Discard()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, c := range []interface {
		Register(context.Context, ctrl.Manager) error
	}{
		nodeclass.New(mgr.GetClient(), mgr.GetRESTMapper(), nil),
		providerid.New(mgr.GetClient(), mgr.GetAPIReader(), events),
		capacity.New(mgr.GetClient(), flavors),
		quotausage.New(mgr.GetClient(), flavors, tracker),
	} {
		if err := c.Register(ctx, mgr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	kube = env.Client
	gcClock = clocktesting.NewFakeClock(time.Now())
	gc = garbagecollection.New(env.Client, env.Client, events, gcClock, time.Minute)
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return m.Run()
}
