package lifecycle

import (
	"context"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// The simulated CKE runs the e2e suite's timings (stack.SuiteSimOptions): a node joins in
// seconds. These bounds leave room for a slow, shared machine.
const (
	launchTimeout = 2 * time.Minute
	// Consolidation waits consolidateAfter, then Karpenter validates its decision for ~15 s,
	// then drains, then the NodeGroup's teardown runs.
	disruptTimeout = 3 * time.Minute
	// drainTimeout bounds an uninstall's wait for every claim and NodeGroup to go.
	drainTimeout = 3 * time.Minute
)

// change is an object created or deleted, or a NodeClaim that drifted or was marked for
// deletion.
type change struct {
	Kind, What, Name string
}

func (c change) String() string { return c.What + " " + c.Kind + " " + c.Name }

// changes records every NodeGroup, NodeClaim and Node created or deleted and every NodeClaim
// that drifts or is marked for deletion, from its start on (harness.Record: what exists
// already is not reported as created). A watch that ends before the test fails it.
type changes struct {
	mu   sync.Mutex
	seen []change
	// once keys what was recorded by object UID: a claim stays drifted over many updates, and
	// an object re-created under its name is another object.
	once map[string]bool
	t    *testing.T
	recs map[string]*harness.Recording
}

func watchChanges(t *testing.T) *changes {
	t.Helper()
	c := &changes{once: map[string]bool{}, t: t, recs: map[string]*harness.Recording{}}
	t.Cleanup(c.close)
	for _, w := range []struct {
		kind     string
		list     client.ObjectList
		modified func(client.Object) []string
	}{
		{"NodeGroup", &ngv1.NodeGroupList{}, nil},
		{"NodeClaim", &karpv1.NodeClaimList{}, claimTransitions},
		{"Node", &corev1.NodeList{}, nil},
	} {
		_, rec, err := harness.Record(context.Background(), env.Client, w.list, func(ev harness.Event) {
			switch ev.Type {
			case watch.Added:
				c.add(change{w.kind, "created", ev.Object.GetName()}, ev.Object.GetUID())
			case watch.Deleted:
				c.add(change{w.kind, "deleted", ev.Object.GetName()}, ev.Object.GetUID())
			case watch.Modified:
				if w.modified != nil {
					for _, what := range w.modified(ev.Object) {
						c.add(change{w.kind, what, ev.Object.GetName()}, ev.Object.GetUID())
					}
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		c.recs[w.kind] = rec
	}
	return c
}

// close stops the recording, failing the test if a watch ended before; an uninstall closes
// it before deleting the CRDs, which ends their watches.
func (c *changes) close() {
	c.mu.Lock()
	recs := c.recs
	c.recs = nil
	c.mu.Unlock()
	for kind, rec := range recs {
		if err := rec.Stop(); err != nil {
			c.t.Errorf("recording %ss: %v", kind, err)
		}
	}
}

// claimTransitions are what an update made of a claim that an upgrade must never cause.
func claimTransitions(o client.Object) []string {
	nc := o.(*karpv1.NodeClaim)
	var out []string
	if nc.StatusConditions().Get(karpv1.ConditionTypeDrifted).IsTrue() {
		out = append(out, "drifted")
	}
	if nc.DeletionTimestamp != nil {
		out = append(out, "marked for deletion")
	}
	return out
}

// add records ch of the object uid once.
func (c *changes) add(ch change, uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := string(uid) + " " + ch.What
	if c.once[key] {
		return
	}
	c.once[key] = true
	c.seen = append(c.seen, ch)
}

// mark is a position in the record, for since.
func (c *changes) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// since returns what was recorded from mark on, as strings (gomega prints them readably).
func (c *changes) since(mark int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, ch := range c.seen[mark:] {
		out = append(out, ch.String())
	}
	return out
}

// fleet is the UIDs of the NodeClaims, NodeGroups and Nodes of a NodePool: an object
// re-created under the same name shows as a different UID.
type fleet struct {
	Claims, Groups, Nodes map[string]types.UID
}

func fleetOf(ctx context.Context, g Gomega, pool string) fleet {
	f := fleet{Claims: map[string]types.UID{}, Groups: map[string]types.UID{}, Nodes: map[string]types.UID{}}
	claims, err := env.NodeClaims(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range claims {
		f.Claims[c.Name] = c.UID
	}
	groups, err := env.PoolNodeGroups(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	for _, ng := range groups {
		f.Groups[ng.Name] = ng.UID
	}
	nodes, err := env.PoolNodes(ctx, pool)
	g.Expect(err).NotTo(HaveOccurred())
	for _, n := range nodes {
		f.Nodes[n.Name] = n.UID
	}
	return f
}

// waitSteady waits until a pool has n claims, each Initialized with its NodeGroup Synced and
// its node up: nothing of the launch left in flight.
func waitSteady(ctx context.Context, g Gomega, pool string, n int) fleet {
	var f fleet
	g.Eventually(func(g Gomega) {
		claims, err := env.NodeClaims(ctx, pool)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(claims).To(HaveLen(n), "NodeClaims of %s", pool)
		for _, c := range claims {
			g.Expect(c.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue()).To(BeTrue(), "NodeClaim %s Initialized", c.Name)
			ng := &ngv1.NodeGroup{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: c.Name}, ng)).To(Succeed(), "the NodeGroup of %s", c.Name)
			g.Expect(ng.Status.Phase).To(Equal(ngv1.PhaseSynced), "NodeGroup %s", ng.Name)
		}
		f = fleetOf(ctx, g, pool)
		g.Expect(f.Groups).To(HaveLen(n), "NodeGroups of %s", pool)
		g.Expect(f.Nodes).To(HaveLen(n), "Nodes of %s", pool)
	}).WithTimeout(launchTimeout).WithPolling(time.Second).Should(Succeed())
	return f
}

// fixture makes what a user runs on Karpenter's nodes, for the tests that cannot use a
// harness.Scenario: its cleanup needs the CRDs and a running controller, which an uninstall
// takes away.
type fixture struct {
	t    *testing.T
	g    Gomega
	ctx  context.Context
	name string
	ns   string
}

func newFixture(t *testing.T, name string) *fixture {
	t.Helper()
	f := &fixture{t: t, g: NewWithT(t), ctx: context.Background(), name: name, ns: "lifecycle-" + name}
	f.g.Expect(env.Client.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})).To(Succeed())
	// The namespace goes before the next test starts: its pods, left Pending by an uninstall,
	// would otherwise be the next controller's to try to schedule.
	t.Cleanup(func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}
		bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
		if err := env.Client.Delete(f.ctx, ns, bg); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting namespace %s: %v", f.ns, err)
			return
		}
		NewWithT(t).Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(f.ctx, client.ObjectKeyFromObject(ns), ns))
		}).WithTimeout(2*time.Minute).Should(BeTrue(), "namespace %s deleted", f.ns)
	})
	// Pods are admitted only once the namespace's default ServiceAccount exists.
	f.g.Eventually(func() error {
		return env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "default"}, &corev1.ServiceAccount{})
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return f
}

func (f *fixture) class() *v1alpha1.CleverNodeClass {
	f.t.Helper()
	nc := harness.NewNodeClass(f.name, nil)
	f.g.Expect(env.Client.Create(f.ctx, nc)).To(Succeed())
	harness.WaitNodeClassReady(f.ctx, f.g, env.Client, nc)
	return nc
}

// pool is a NodePool of 2XS on-demand nodes: with one 1-CPU pod per node there is then nothing
// to consolidate, so no node goes unless the test makes it go.
func (f *fixture) pool(class *v1alpha1.CleverNodeClass) *karpv1.NodePool {
	f.t.Helper()
	np := harness.NewNodePool(f.name, class.Name, []string{"2XS"}, time.Minute, harness.OnDemand)
	f.g.Expect(env.Client.Create(f.ctx, np)).To(Succeed())
	// Pods pending on a pool Karpenter has not validated yet make the provisioner log
	// "ignoring nodepool, not ready" as an error.
	harness.WaitNodePoolsReady(f.ctx, f.g, env.Client, np.Name)
	return np
}

// workload is a Deployment of replicas 1-CPU pause pods on pool, one per node.
func (f *fixture) workload(pool *karpv1.NodePool, replicas int32) *appsv1.Deployment {
	f.t.Helper()
	d := harness.NewDeployment(f.ns, f.name, pool.Name, replicas, "1", "1Gi", harness.OnePerNode)
	f.g.Expect(env.Client.Create(f.ctx, d)).To(Succeed())
	return d
}

// waitRunning waits until n pods of d are Running and Ready.
func (f *fixture) waitRunning(d *appsv1.Deployment, n int) {
	f.t.Helper()
	f.g.Eventually(func(g Gomega) {
		running, err := harness.RunningPods(f.ctx, env.Client, d)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(running).To(HaveLen(n), "Running pods of %s", d.Name)
	}).WithTimeout(launchTimeout).WithPolling(time.Second).Should(Succeed())
}

// controllerLog collects the controller runs of a test that has no harness.Scenario, to fail
// it on an error line the test does not expect, as a Scenario does.
type controllerLog struct {
	marks   map[*stack.Controller]int
	allowed []*regexp.Regexp
}

func watchLog() *controllerLog {
	c := env.Controller()
	return &controllerLog{marks: map[*stack.Controller]int{c: c.LineCount()}}
}

// allow lets the controller log error lines matching any of patterns (against the raw line).
func (l *controllerLog) allow(patterns ...string) {
	for _, p := range patterns {
		l.allowed = append(l.allowed, regexp.MustCompile(p))
	}
}

// add takes the current controller run in, from its first line.
func (l *controllerLog) add() {
	if c := env.Controller(); c != nil {
		if _, ok := l.marks[c]; !ok {
			l.marks[c] = 0
		}
	}
}

// errors are the error lines logged before each run's SIGTERM.
func (l *controllerLog) errors() []string {
	var out []string
	for c, mark := range l.marks {
		for _, line := range c.ErrorsSince(mark) {
			if !slices.ContainsFunc(l.allowed, func(r *regexp.Regexp) bool { return r.MatchString(line.Raw) }) {
				out = append(out, line.Raw)
			}
		}
	}
	slices.Sort(out)
	return out
}

// crdGone says whether a CRD is deleted entirely.
func crdGone(ctx context.Context, name string) (bool, error) {
	err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}
