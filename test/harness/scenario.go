package harness

import (
	"context"
	"fmt"
	"hash/crc32"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
)

// CleanupTimeout bounds how long a scenario's cleanup waits for its nodes to go.
const CleanupTimeout = 3 * time.Minute

// Scenario is one test's slice of the shared Env: its own namespace, NodePools and classes,
// a log mark, and a cleanup that proves nothing was left behind.
type Scenario struct {
	T   *testing.T
	Env *Env
	G   gomega.Gomega
	Ctx context.Context
	// Namespace holds the scenario's workloads; deleted at cleanup.
	Namespace string
	// Name is a DNS-label-safe short name, used for the scenario's objects.
	Name string

	start       time.Time
	marks       map[*Controller]int
	allowed     []*regexp.Regexp
	created     []client.Object
	nodesBefore map[string]bool
	groupBefore map[string]bool
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Scenario starts a scenario for t. Call it first in every test.
func (e *Env) Scenario(t *testing.T) *Scenario {
	t.Helper()
	name := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(strings.TrimPrefix(t.Name(), "Test")), "-"), "-")
	if len(name) > 40 {
		// Two long test names may share their first 40 characters: the hash of the whole name
		// keeps their namespaces apart.
		name = fmt.Sprintf("%s-%08x", strings.TrimRight(name[:31], "-"), crc32.ChecksumIEEE([]byte(t.Name())))
	}
	s := &Scenario{
		T: t, Env: e, G: gomega.NewWithT(t), Ctx: context.Background(),
		Namespace: "e2e-" + name, Name: name, start: time.Now(),
		marks: map[*Controller]int{e.ctrl: e.ctrl.LineCount()},
	}
	s.nodesBefore, s.groupBefore = map[string]bool{}, map[string]bool{}
	nodes := &corev1.NodeList{}
	s.must(e.Client.List(s.Ctx, nodes))
	for _, n := range nodes.Items {
		s.nodesBefore[n.Name] = true
	}
	groups := &ngv1.NodeGroupList{}
	s.must(e.Client.List(s.Ctx, groups))
	for _, g := range groups.Items {
		s.groupBefore[g.Name] = true
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}
	s.must(e.Client.Create(s.Ctx, ns))
	// Pods are admitted only once the namespace's default ServiceAccount exists.
	s.G.Eventually(func() error {
		return e.Client.Get(s.Ctx, client.ObjectKey{Namespace: s.Namespace, Name: "default"}, &corev1.ServiceAccount{})
	}).WithTimeout(30 * time.Second).Should(gomega.Succeed())
	t.Cleanup(s.cleanup)
	// Scenarios run one at a time: the package-level Expect/Eventually report to this test.
	gomega.RegisterTestingT(t)
	return s
}

func (s *Scenario) must(err error) {
	s.T.Helper()
	if err != nil {
		s.T.Fatal(err)
	}
}

// AllowErrors lets the controller log errors matching any of the patterns (against the raw
// line) during this scenario.
func (s *Scenario) AllowErrors(patterns ...string) {
	for _, p := range patterns {
		s.allowed = append(s.allowed, regexp.MustCompile(p))
	}
}

// Track registers an object the scenario created for deletion at cleanup (reverse order).
func (s *Scenario) Track(obj client.Object) { s.created = append(s.created, obj) }

// Create creates obj and tracks it.
func (s *Scenario) Create(obj client.Object) {
	s.T.Helper()
	s.must(s.Env.Client.Create(s.Ctx, obj))
	s.Track(obj)
}

// NodeClass creates a CleverNodeClass named after the scenario (plus suffix) and waits for it
// to be Ready.
func (s *Scenario) NodeClass(suffix string, labels map[string]string) *v1alpha1.CleverNodeClass {
	s.T.Helper()
	nc := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: s.Name + suffix}}
	if len(labels) > 0 {
		nc.Spec.Labels = map[string]v1alpha1.LabelValue{}
		for k, v := range labels {
			nc.Spec.Labels[k] = v1alpha1.LabelValue(v)
		}
	}
	s.Create(nc)
	s.G.Eventually(func(g gomega.Gomega) {
		got := &v1alpha1.CleverNodeClass{}
		g.Expect(s.Env.Client.Get(s.Ctx, client.ObjectKeyFromObject(nc), got)).To(gomega.Succeed())
		g.Expect(got.StatusConditions().Root().IsTrue()).To(gomega.BeTrue(), "CleverNodeClass %s not Ready: %+v", nc.Name, got.Status.Conditions)
	}).WithTimeout(30 * time.Second).Should(gomega.Succeed())
	return nc
}

// PoolOption edits a NodePool before creation.
type PoolOption func(*karpv1.NodePool)

// NodePool creates a NodePool named after the scenario (plus suffix) on class, allowing the
// given flavors (all when empty), consolidating empty or underutilized nodes after
// consolidateAfter.
func (s *Scenario) NodePool(suffix string, class *v1alpha1.CleverNodeClass, flavors []string, consolidateAfter time.Duration, opts ...PoolOption) *karpv1.NodePool {
	s.T.Helper()
	if len(flavors) == 0 {
		flavors = []string{"2XS", "XS", "S", "M", "L", "XL"}
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: s.Name + suffix}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: v1alpha1.Group, Kind: "CleverNodeClass", Name: class.Name}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{
		Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: flavors,
	}}
	np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("Never")
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(consolidateAfter.String())
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	for _, o := range opts {
		o(np)
	}
	s.Create(np)
	return np
}

// WorkloadOption edits a Deployment before creation.
type WorkloadOption func(*appsv1.Deployment)

// Deployment creates, in the scenario's namespace, a Deployment of pause pods requesting cpu
// and memory, held to the NodePool pool by node affinity.
func (s *Scenario) Deployment(name, pool string, replicas int32, cpu, memory string, opts ...WorkloadOption) *appsv1.Deployment {
	s.T.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       PausePodSpec(pool, cpu, memory),
			},
		},
	}
	for _, o := range opts {
		o(d)
	}
	s.must(s.Env.Client.Create(s.Ctx, d))
	return d
}

// OnDemand pins the NodePool to on-demand capacity, the only kind CKE sells. Without it,
// Karpenter's replace consolidation asks for spot (see docs/e2e.md, known issues).
func OnDemand(np *karpv1.NodePool) {
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
		Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand},
	})
}

// AwayFrom keeps the Deployment's pods off nodes running pods with labels (required
// anti-affinity on hostname).
func AwayFrom(labels map[string]string) WorkloadOption {
	return func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey:   corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
			}},
		}
	}
}

// OnePerNode spreads the Deployment's pods one per node: away from each other.
func OnePerNode(d *appsv1.Deployment) { AwayFrom(d.Spec.Selector.MatchLabels)(d) }

// Update reads the live obj (by obj's name and namespace), applies change to it and writes it
// back, retrying on conflicts with the controllers that write the same object.
func Update[T client.Object](s *Scenario, obj T, change func(T)) {
	s.T.Helper()
	s.G.Eventually(func() error {
		if err := s.Env.Client.Get(s.Ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return s.Env.Client.Update(s.Ctx, obj)
	}).WithTimeout(10 * time.Second).Should(gomega.Succeed())
}

// Scale sets a Deployment's replicas.
func (s *Scenario) Scale(d *appsv1.Deployment, replicas int32) {
	s.T.Helper()
	Update(s, d.DeepCopy(), func(cur *appsv1.Deployment) { cur.Spec.Replicas = ptr.To(replicas) })
}

// Pods lists the pods of a Deployment.
func (s *Scenario) Pods(d *appsv1.Deployment) []corev1.Pod {
	s.T.Helper()
	pods := &corev1.PodList{}
	s.must(s.Env.Client.List(s.Ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)))
	return pods.Items
}

// RunningPods counts the Deployment's pods that are Running, Ready and not terminating.
func (s *Scenario) RunningPods(d *appsv1.Deployment) (int, []corev1.Pod) {
	var running []corev1.Pod
	for _, p := range s.Pods(d) {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && PodReady(&p) {
			running = append(running, p)
		}
	}
	return len(running), running
}

// WaitRunning waits until exactly n pods of d are Running and Ready, and returns them.
func (s *Scenario) WaitRunning(d *appsv1.Deployment, n int, timeout time.Duration) []corev1.Pod {
	s.T.Helper()
	var pods []corev1.Pod
	s.G.Eventually(func(g gomega.Gomega) {
		var count int
		count, pods = s.RunningPods(d)
		all := s.Pods(d)
		g.Expect(count).To(gomega.Equal(n), "running pods of %s (of %d)", d.Name, len(all))
		g.Expect(all).To(gomega.HaveLen(n), "pods of %s", d.Name)
	}).WithTimeout(timeout).WithPolling(250 * time.Millisecond).Should(gomega.Succeed())
	return pods
}

// PodReady says whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeClaims lists the NodeClaims of a NodePool ("" for all).
func (e *Env) NodeClaims(ctx context.Context, pool string) ([]karpv1.NodeClaim, error) {
	l := &karpv1.NodeClaimList{}
	var opts []client.ListOption
	if pool != "" {
		opts = append(opts, client.MatchingLabels{karpv1.NodePoolLabelKey: pool})
	}
	if err := e.Client.List(ctx, l, opts...); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// NodeGroups lists every NodeGroup.
func (e *Env) NodeGroups(ctx context.Context) ([]ngv1.NodeGroup, error) {
	l := &ngv1.NodeGroupList{}
	if err := e.Client.List(ctx, l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// PoolNodeGroups lists the NodeGroups launched for a NodePool.
func (e *Env) PoolNodeGroups(ctx context.Context, pool string) ([]ngv1.NodeGroup, error) {
	l := &ngv1.NodeGroupList{}
	if err := e.Client.List(ctx, l, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// PoolNodes lists the Nodes of a NodePool (by Karpenter's label).
func (e *Env) PoolNodes(ctx context.Context, pool string) ([]corev1.Node, error) {
	l := &corev1.NodeList{}
	if err := e.Client.List(ctx, l, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Events lists core events with a reason, across namespaces, oldest first.
func (e *Env) Events(ctx context.Context, reason string) ([]corev1.Event, error) {
	l := &corev1.EventList{}
	if err := e.Client.List(ctx, l); err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, ev := range l.Items {
		if reason == "" || ev.Reason == reason {
			out = append(out, ev)
		}
	}
	sort.Slice(out, func(i, j int) bool { return eventTime(out[i]).Before(eventTime(out[j])) })
	return out, nil
}

// EventsSince lists events with a reason whose last occurrence is at or after since,
// optionally about one object name.
func (s *Scenario) EventsSince(reason, object string) []corev1.Event {
	evs, err := s.Env.Events(s.Ctx, reason)
	s.must(err)
	var out []corev1.Event
	for _, ev := range evs {
		if eventTime(ev).Before(s.start.Truncate(time.Second)) {
			continue
		}
		if object != "" && ev.InvolvedObject.Name != object {
			continue
		}
		out = append(out, ev)
	}
	return out
}

func eventTime(ev corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	default:
		return ev.CreationTimestamp.Time
	}
}

// Metric reads a metric of the running controller.
func (s *Scenario) Metric(name string, labels map[string]string) float64 {
	s.T.Helper()
	v, err := s.Env.ctrl.Metric(name, labels)
	s.must(err)
	return v
}

// RestartController restarts the controller (gracefully) with overrides; its log is checked
// at cleanup like the first one's.
func (s *Scenario) RestartController(overrides map[string]string) {
	s.T.Helper()
	s.must(s.Env.RestartController(s.Ctx, overrides))
	s.marks[s.Env.ctrl] = 0
}

// ErrorLines are the unexpected controller error lines logged during the scenario so far.
func (s *Scenario) ErrorLines() []string {
	var out []string
	for c, mark := range s.marks {
		for _, l := range c.ErrorsSince(mark) {
			if !slices.ContainsFunc(s.allowed, func(r *regexp.Regexp) bool { return r.MatchString(l.Raw) }) {
				out = append(out, l.Raw)
			}
		}
	}
	return out
}

func (s *Scenario) cleanup() {
	t := s.T
	failedBefore := t.Failed()
	if failedBefore {
		s.Dump()
	}
	ctx := s.Ctx
	cl := s.Env.Client
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	if !s.Env.ctrl.Running() {
		t.Errorf("cleanup: the controller is not running: %v\n%s", s.Env.ctrl.waitErr, s.Env.ctrl.Tail(40))
		s.must(s.Env.StartController(ctx, nil))
		s.marks[s.Env.ctrl] = 0
	}
	// Workloads first, so that draining has nothing to evict; then the claims, so that no
	// NodePool disappears under a live claim; then the rest, classes last.
	_ = cl.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(s.Namespace), bg)
	_ = cl.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(s.Namespace), client.GracePeriodSeconds(0))
	gomega.NewWithT(t).Eventually(func() []corev1.Pod {
		pods := &corev1.PodList{}
		_ = cl.List(ctx, pods, client.InNamespace(s.Namespace))
		return pods.Items
	}).WithTimeout(time.Minute).Should(gomega.BeEmpty(), "pods of the scenario")
	for _, obj := range s.created {
		if _, isGroup := obj.(*ngv1.NodeGroup); isGroup {
			if err := cl.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("cleanup: deleting NodeGroup %s: %v", obj.GetName(), err)
			}
		}
	}
	// Whatever the NodePools' deletion did not take down, Karpenter must, through its claims.
	g := gomega.NewWithT(t)
	ok := g.Eventually(func(g gomega.Gomega) {
		claims, err := s.Env.NodeClaims(ctx, "")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		for i := range claims {
			if claims[i].DeletionTimestamp == nil {
				_ = cl.Delete(ctx, &claims[i])
			}
		}
		g.Expect(names(claims)).To(gomega.BeEmpty(), "NodeClaims left")
		groups, err := s.Env.NodeGroups(ctx)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		var left []string
		for _, ng := range groups {
			if !s.groupBefore[ng.Name] {
				left = append(left, ng.Name)
			}
		}
		g.Expect(left).To(gomega.BeEmpty(), "NodeGroups left")
		nodes := &corev1.NodeList{}
		g.Expect(cl.List(ctx, nodes)).To(gomega.Succeed())
		left = nil
		for _, n := range nodes.Items {
			if !s.nodesBefore[n.Name] {
				left = append(left, n.Name)
			}
		}
		g.Expect(left).To(gomega.BeEmpty(), "Nodes left")
	}).WithTimeout(CleanupTimeout).WithPolling(time.Second).Should(gomega.Succeed())
	for i := len(s.created) - 1; i >= 0; i-- {
		if _, isClass := s.created[i].(*v1alpha1.CleverNodeClass); isClass {
			continue
		}
		if err := cl.Delete(ctx, s.created[i], bg); client.IgnoreNotFound(err) != nil {
			t.Errorf("cleanup: deleting %T %s: %v", s.created[i], s.created[i].GetName(), err)
		}
	}
	_ = cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}, bg)
	for _, obj := range s.created {
		if _, isClass := obj.(*v1alpha1.CleverNodeClass); isClass {
			if err := cl.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("cleanup: deleting CleverNodeClass %s: %v", obj.GetName(), err)
			}
		}
	}
	g.Eventually(func(g gomega.Gomega) {
		for _, obj := range s.created {
			err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			g.Expect(apierrors.IsNotFound(err)).To(gomega.BeTrue(), "%T %s still there (%v)", obj, obj.GetName(), err)
		}
	}).WithTimeout(time.Minute).Should(gomega.Succeed())
	s.Env.RestoreOperator()
	s.Env.Prices.Reset()
	if errs := s.ErrorLines(); len(errs) > 0 {
		t.Errorf("the controller logged %d unexpected error line(s) during the scenario:\n%s", len(errs), strings.Join(errs, "\n"))
	}
	if !ok && !failedBefore {
		s.Dump()
	}
	t.Logf("scenario %s: %s including cleanup", s.Name, time.Since(s.start).Round(100*time.Millisecond))
}

func names[T any, P interface {
	*T
	client.Object
}](items []T) []string {
	var out []string
	for i := range items {
		out = append(out, P(&items[i]).GetName())
	}
	return out
}

// Dump logs the controller log tail, recent events and the state of NodeClaims, NodeGroups,
// Nodes and the scenario's pods.
func (s *Scenario) Dump() {
	t, ctx, cl := s.T, s.Ctx, s.Env.Client
	var b strings.Builder
	fmt.Fprintf(&b, "===== dump of scenario %s (work dir %s, cluster dir %s)\n", s.Name, s.Env.dir, s.Env.Cluster.Dir())
	fmt.Fprintf(&b, "--- controller log tail (%s)\n%s\n", s.Env.ctrl.LogPath, s.Env.ctrl.Tail(60))
	if evs, err := s.Env.Events(ctx, ""); err == nil {
		fmt.Fprintf(&b, "--- events since the scenario started\n")
		for _, ev := range evs {
			if eventTime(ev).Before(s.start.Truncate(time.Second)) {
				continue
			}
			fmt.Fprintf(&b, "%s %s %s/%s %s: %s\n", eventTime(ev).Format("15:04:05"), ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
	if claims, err := s.Env.NodeClaims(ctx, ""); err == nil {
		fmt.Fprintf(&b, "--- NodeClaims\n")
		for _, nc := range claims {
			var conds []string
			for _, c := range nc.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
			}
			fmt.Fprintf(&b, "%s pool=%s providerID=%s node=%s deleting=%v %s\n", nc.Name, nc.Labels[karpv1.NodePoolLabelKey], nc.Status.ProviderID, nc.Status.NodeName, nc.DeletionTimestamp != nil, strings.Join(conds, " "))
		}
	}
	if groups, err := s.Env.NodeGroups(ctx); err == nil {
		fmt.Fprintf(&b, "--- NodeGroups\n")
		for _, g := range groups {
			var conds []string
			for _, c := range g.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
			}
			fmt.Fprintf(&b, "%s flavor=%s nodeCount=%d phase=%s deleting=%v owners=%d %s\n", g.Name, g.Spec.Flavor, g.Spec.NodeCount, g.Status.Phase, g.DeletionTimestamp != nil, len(g.OwnerReferences), strings.Join(conds, " "))
		}
	}
	nodes := &corev1.NodeList{}
	if cl.List(ctx, nodes) == nil {
		fmt.Fprintf(&b, "--- Nodes\n")
		for _, n := range nodes.Items {
			var taints []string
			for _, tn := range n.Spec.Taints {
				taints = append(taints, tn.Key+":"+string(tn.Effect))
			}
			fmt.Fprintf(&b, "%s ready=%v providerID=%s flavor=%s pool=%s taints=%v deleting=%v\n", n.Name, sim.NodeReady(&n), n.Spec.ProviderID, n.Labels[corev1.LabelInstanceTypeStable], n.Labels[karpv1.NodePoolLabelKey], taints, n.DeletionTimestamp != nil)
		}
	}
	pods := &corev1.PodList{}
	if cl.List(ctx, pods, client.InNamespace(s.Namespace)) == nil {
		fmt.Fprintf(&b, "--- Pods in %s\n", s.Namespace)
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "%s phase=%s node=%s ready=%v\n", p.Name, p.Status.Phase, p.Spec.NodeName, PodReady(&p))
		}
	}
	t.Log(b.String())
}
