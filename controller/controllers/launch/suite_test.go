package launch_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

// The follower's thresholds in these tests, crossed by stepping the fake clock; longer than
// every other step the tests take. Overdue comes first, unlike the defaults, so that a launch
// stepped past it is reported without being given up.
const (
	overdueAfter       = time.Hour
	stoppedGiveUpAfter = 2 * time.Hour
	giveUpAfter        = 3 * time.Hour
)

var (
	env      *testenv.Env
	follower *launch.Controller
	// shipped is a follower with the settings' default timings, registered with no manager.
	shipped  *launch.Controller
	provider *cloudprovider.CloudProvider
	clk      *clocktesting.FakeClock
	seen     = &eventLog{}
	hooks    = &readHooks{after: map[string]func(){}}
	// cacheHooks run once, right after the cached read of a NodeClaim by a test's own
	// Reconcile call (own).
	cacheHooks = &readHooks{after: map[string]func(){}}
	holds      = &readHolds{held: map[string]chan struct{}{}}
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
		cached = mgr.GetClient()
		follower = launch.New(&countedClient{Client: mgr.GetClient()}, &hookedReader{Reader: env.Client}, provider, recorder, clk,
			launch.Timings{OverdueAfter: overdueAfter, GiveUpAfter: giveUpAfter, StoppedGiveUpAfter: stoppedGiveUpAfter})
		// The shipped defaults, on the same clients, driven only by tests' own Reconcile calls:
		// the manager's follower, with its longer times, never gives up first.
		defaults := settings.Defaults()
		shipped = launch.New(mgr.GetClient(), env.Client, provider, recorder, clk, launch.Timings{OverdueAfter: defaults.SyncOverdueAfter.Duration,
			GiveUpAfter: defaults.LaunchGiveUpAfter.Duration, StoppedGiveUpAfter: defaults.StoppedLaunchGiveUpAfter.Duration})
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

// ownCall marks the context of a test's own call to Reconcile.
type ownCall struct{}

func own(ctx context.Context) context.Context { return context.WithValue(ctx, ownCall{}, true) }

// readHolds make the manager's reconciles wait before reading a NodeClaim while a test plays a
// race through its own Reconcile call: the hooks then fire on that call's reads only, in its
// order, and no reconcile of the manager acts on the claim meanwhile.
type readHolds struct {
	mu   sync.Mutex
	held map[string]chan struct{}
}

// hold holds the manager's reads of the claim until the returned release is called.
func (h *readHolds) hold(name string) (release func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.held[name] = ch
	h.mu.Unlock()
	return sync.OnceFunc(func() {
		h.mu.Lock()
		delete(h.held, name)
		h.mu.Unlock()
		close(ch)
	})
}

// holding returns what a read of the claim in ctx must wait for, nil when it need not.
func (h *readHolds) holding(ctx context.Context, name string) chan struct{} {
	if ctx.Value(ownCall{}) != nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[name]
}

func (h *readHolds) wait(ctx context.Context, name string) {
	if ch := h.holding(ctx, name); ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

// cached is the manager's cache, which the follower reads claims and groups from.
var cached client.Reader

// inCache waits until the follower's cache has caught up with obj as the test last wrote it, so
// that a test's own Reconcile call acts on what the test wrote. An object the manager's follower
// deleted meanwhile (a refusal the test wrote is acted on at once) has no later version to wait
// for: the cache has caught up once the apiserver no longer has it either.
func inCache(g Gomega, obj client.Object) {
	want, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		ctx, key := context.Background(), client.ObjectKeyFromObject(obj)
		current := obj.DeepCopyObject().(client.Object)
		err := cached.Get(ctx, key, current)
		if apierrors.IsNotFound(err) && apierrors.IsNotFound(env.Client.Get(ctx, key, obj.DeepCopyObject().(client.Object))) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		got, err := strconv.ParseUint(current.GetResourceVersion(), 10, 64)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(BeNumerically(">=", want))
	}).WithTimeout(wait).Should(Succeed(), "the follower's cache catching up with %s", obj.GetName())
}

// claimReads counts the follower's reads of each NodeClaim, cached or not, by name.
var claimReads sync.Map

func readCounter(name string) *atomic.Int64 {
	n, _ := claimReads.LoadOrStore(name, new(atomic.Int64))
	return n.(*atomic.Int64)
}

func readsOf(name string) int64 { return readCounter(name).Load() }

func countRead(obj client.Object, name string) {
	if _, isClaim := obj.(*karpv1.NodeClaim); isClaim {
		readCounter(name).Add(1)
	}
}

// countedClient is the follower's cached client, its NodeClaim reads counted.
type countedClient struct{ client.Client }

func (c *countedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	countRead(obj, key.Name)
	err := c.Client.Get(ctx, key, obj, opts...)
	if _, isClaim := obj.(*karpv1.NodeClaim); isClaim && err == nil && ctx.Value(ownCall{}) != nil {
		if fn := cacheHooks.take(key.Name); fn != nil {
			fn()
		}
	}
	return err
}

type hookedReader struct{ client.Reader }

func (r *hookedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	countRead(obj, key.Name)
	if _, isClaim := obj.(*karpv1.NodeClaim); isClaim {
		holds.wait(ctx, key.Name)
	}
	err := r.Reader.Get(ctx, key, obj, opts...)
	// A read of the manager's that was under way when the hold began is not the test's.
	if _, isClaim := obj.(*karpv1.NodeClaim); isClaim && err == nil && holds.holding(ctx, key.Name) == nil {
		if fn := hooks.take(key.Name); fn != nil {
			fn()
		}
	}
	return err
}
