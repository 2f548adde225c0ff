package quotausage_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

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
	os.Exit(testenv.RunWithManager(m, func(ctx context.Context, e *testenv.Env, mgr ctrl.Manager) error {
		env = e
		flavors, err := catalog.Load("", "par", logr.Discard())
		if err != nil {
			return err
		}
		tracker = quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{CPU: 40, GB: 40})
		return quotausage.New(mgr.GetClient(), flavors, tracker).Register(ctx, mgr)
	}))
}
