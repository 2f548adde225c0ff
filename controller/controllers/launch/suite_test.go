package launch_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/launch"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

// overdueAfter is the follower's threshold in these tests, crossed by stepping the fake clock;
// longer than every other step the tests take.
const overdueAfter = time.Hour

var (
	env      *testenv.Env
	follower *launch.Controller
	provider *cloudprovider.CloudProvider
	clk      *clocktesting.FakeClock
	seen     = &eventLog{}
	hooks    = &readHooks{after: map[string]func(){}}
)

// TestMain runs the launch follower in a real manager against a real apiserver, as main.go
// wires it, with the real cloud provider behind it. Tests play the node-group operator by
// writing NodeGroup statuses by hand.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithManager(m, func(ctx context.Context, e *testenv.Env, mgr ctrl.Manager) error {
		env = e
		rec := record.NewFakeRecorder(1000)
		go seen.drain(ctx, rec.Events)
		recorder := events.NewRecorder(rec)
		clk = clocktesting.NewFakeClock(time.Now())
		cat, err := catalog.Load("", "par", logr.Discard())
		if err != nil {
			return err
		}
		provider = cloudprovider.New(env.Client, nodegroup.NewClient(env.Client, env.Client, env.Client), cat, nil,
			quota.NewTracker(clk, quota.Limit{}), recorder, clk, 10*time.Second)
		follower = launch.New(mgr.GetClient(), &hookedReader{Reader: env.Client}, provider, recorder, clk, overdueAfter)
		return follower.Register(ctx, mgr)
	}))
}

// eventLog keeps every event published, for tests to find theirs by the group's name.
type eventLog struct {
	mu  sync.Mutex
	all []string
}

func (l *eventLog) drain(ctx context.Context, ch <-chan string) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-ch:
			l.mu.Lock()
			l.all = append(l.all, e)
			l.mu.Unlock()
		}
	}
}

// about returns the events whose message names the group.
func (l *eventLog) about(name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.all {
		if strings.Contains(e, "NodeGroup "+name+" ") || strings.Contains(e, "NodeGroup "+name+":") {
			out = append(out, e)
		}
	}
	return out
}

// readHooks run once, right after the follower's uncached read of a NodeClaim returns: a test
// changes the claim there to play a race the follower must lose safely.
type readHooks struct {
	mu    sync.Mutex
	after map[string]func()
}

func (h *readHooks) set(name string, fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.after[name] = fn
}

func (h *readHooks) take(name string) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn := h.after[name]
	delete(h.after, name)
	return fn
}

type hookedReader struct{ client.Reader }

func (r *hookedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if _, isClaim := obj.(*karpv1.NodeClaim); isClaim && err == nil {
		if fn := hooks.take(key.Name); fn != nil {
			fn()
		}
	}
	return err
}
