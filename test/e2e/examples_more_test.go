package e2e

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// pendingWindow is how long pods that must not get a node are watched staying Pending.
const pendingWindow = 20 * time.Second

// nodeOf returns the node a pod runs on.
func nodeOf(s *harness.Scenario, p corev1.Pod) *corev1.Node {
	s.T.Helper()
	n := &corev1.Node{}
	Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: p.Spec.NodeName}, n)).To(Succeed())
	return n
}

func flavorOf(n *corev1.Node) string { return n.Labels[corev1.LabelInstanceTypeStable] }

// unscheduled counts a Deployment's pods that have no node.
func unscheduled(s *harness.Scenario, d *appsv1.Deployment) int {
	n := 0
	for _, p := range s.Pods(d) {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// karpenterPodMessages are the messages of Karpenter's FailedScheduling events on d's pods.
func karpenterPodMessages(s *harness.Scenario, d *appsv1.Deployment) []string {
	var out []string
	pods := map[string]bool{}
	for _, p := range s.Pods(d) {
		pods[p.Name] = true
	}
	for _, ev := range s.EventsSince("FailedScheduling", "") {
		if ev.InvolvedObject.Namespace == d.Namespace && pods[ev.InvolvedObject.Name] {
			out = append(out, ev.Message)
		}
	}
	return out
}

// poolsReady waits for NodePools to be Ready: Karpenter logs an error for a pending pod while
// a freshly applied pool is not Ready yet.
func poolsReady(s *harness.Scenario, names ...string) {
	s.T.Helper()
	Eventually(func(g Gomega) {
		for _, n := range names {
			np := &karpv1.NodePool{}
			g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: n}, np)).To(Succeed())
			g.Expect(np.StatusConditions().Root().IsTrue()).To(BeTrue(), "NodePool %s Ready: %+v", n, np.Status.Conditions)
		}
	}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// raiseQuota gives the organisation room for the large flavors and tells the controller so.
func raiseQuota(s *harness.Scenario) {
	s.T.Helper()
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.QuotaCPU, o.QuotaRAMGB = 200, 200 })
	s.RestartController(map[string]string{"CLEVER_CLOUD_QUOTA_CPU": "200", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "200"})
	s.T.Cleanup(func() { s.RestartController(nil) }) // runs before the scenario's cleanup
}

// 12c. The placement examples, applied as shipped on one cluster (the default pool's limits
// raised so that its workloads fit together; each workload targets its own pool, so their
// outcomes are independent):
//   - weighted-pools.yaml + inflate.yaml (first, alone): inflate lands on weighted-high's S;
//   - prefer-small.yaml: three 1 vCPU / 1500Mi pods on two 2XS, not one XS;
//   - flavor-pinned.yaml: an M;
//   - one-pod-per-node.yaml: three replicas on three distinct nodes;
//   - large-instances.yaml: a 1 vCPU pod gets an L;
//   - small-flavors.yaml: a pod needing 10Gi gets an S; one needing 9 vCPU (an M) stays Pending;
//   - min-values.yaml: claims list ≥ 3 flavors with minValues 3, the node is a 2XS; a 9 vCPU
//     pod (only M holds it) stays Pending;
//   - cpu-limit.yaml: three 3 vCPU pods → two 2XS (8 vCPU), the third Pending, limit reported;
//   - max-node-lifetime.yaml: its claim carries expireAfter 168h (expiry itself: TestExpireAfter).
func TestExamplesPlacement(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Karpenter core logs pods it cannot place at error level: the Pending probes below.
	s.AllowErrors(`could not schedule pod`)
	raiseQuota(s)
	applyExample(s, "general-purpose.yaml")
	// The workloads below share the default pool: general-purpose.yaml caps it at 16 vCPU /
	// 16Gi (the default quota's headroom), less than they need together.
	harness.Update(s, &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("128Gi")}
	})

	// inflate may use any pool and any node with room: alone first, so that weights decide.
	applyExample(s, "weighted-pools.yaml")
	poolsReady(s, "default", "weighted-high", "weighted-low")
	inflate := deploymentOf(applyExample(s, "inflate.yaml"))
	s.Scale(inflate, 1)
	inflateNode := nodeOf(s, s.WaitRunning(inflate, 1, harness.LaunchTimeout)[0])
	Expect(flavorOf(inflateNode)).To(Equal("S"), "weighted-pools: weighted-high's S")
	Expect(inflateNode.Labels).To(HaveKeyWithValue(karpv1.NodePoolLabelKey, "weighted-high"))

	// Then alone, so that no other workload's nodes can take its pods.
	small := deploymentOf(applyExample(s, "prefer-small.yaml"))
	pods := s.WaitRunning(small, 3, harness.LaunchTimeout)
	hosts := map[string]bool{}
	for _, p := range pods {
		Expect(flavorOf(nodeOf(s, p))).To(Equal("2XS"), "prefer-small pod %s", p.Name)
		hosts[p.Spec.NodeName] = true
	}
	Expect(hosts).To(HaveLen(2), "prefer-small: two 2XS")

	pinned := deploymentOf(applyExample(s, "flavor-pinned.yaml"))
	spread := deploymentOf(applyExample(s, "one-pod-per-node.yaml"))
	for _, f := range []string{"large-instances.yaml", "small-flavors.yaml", "min-values.yaml", "cpu-limit.yaml", "max-node-lifetime.yaml"} {
		applyExample(s, f)
	}
	poolsReady(s, "large", "small", "flexible", "capped", "short-lived")
	large := s.Deployment("large-probe", "large", 1, "1", "1Gi")
	smallFit := s.Deployment("small-fit", "small", 1, "1", "10Gi")
	smallTooBig := s.Deployment("small-too-big", "small", 1, "9", "1Gi")
	flexible := s.Deployment("flexible-probe", "flexible", 1, "1", "1Gi")
	flexibleTooBig := s.Deployment("flexible-too-big", "flexible", 1, "9", "1Gi")
	capped := s.Deployment("capped-probe", "capped", 3, "3", "1Gi")
	lifetime := s.Deployment("lifetime-probe", "short-lived", 1, "1", "1Gi")

	Expect(flavorOf(nodeOf(s, s.WaitRunning(pinned, 1, harness.LaunchTimeout)[0]))).To(Equal("M"), "flavor-pinned")
	hosts = map[string]bool{}
	for _, p := range s.WaitRunning(spread, 3, harness.LaunchTimeout) {
		hosts[p.Spec.NodeName] = true
	}
	Expect(hosts).To(HaveLen(3), "one-pod-per-node: three distinct nodes")
	Expect(flavorOf(nodeOf(s, s.WaitRunning(large, 1, harness.LaunchTimeout)[0]))).To(Equal("L"), "large-instances")
	Expect(flavorOf(nodeOf(s, s.WaitRunning(smallFit, 1, harness.LaunchTimeout)[0]))).To(Equal("S"), "small-flavors, 10Gi")
	Expect(flavorOf(nodeOf(s, s.WaitRunning(flexible, 1, harness.LaunchTimeout)[0]))).To(Equal("2XS"), "min-values")
	s.WaitRunning(lifetime, 1, harness.LaunchTimeout)
	Eventually(func() int { n, _ := s.RunningPods(capped); return n }).WithTimeout(harness.LaunchTimeout).Should(Equal(2), "cpu-limit: two 3 vCPU pods run")

	for _, c := range mustClaims(s, "flexible") {
		var req *karpv1.NodeSelectorRequirementWithMinValues
		for i := range c.Spec.Requirements {
			if c.Spec.Requirements[i].Key == corev1.LabelInstanceTypeStable {
				req = &c.Spec.Requirements[i]
			}
		}
		Expect(req).NotTo(BeNil(), "claim %s has an instance-type requirement", c.Name)
		Expect(req.MinValues).To(HaveValue(Equal(3)), "claim %s", c.Name)
		Expect(len(req.Values)).To(BeNumerically(">=", 3), "claim %s flavors %v", c.Name, req.Values)
	}
	for _, c := range mustClaims(s, "short-lived") {
		Expect(c.Spec.ExpireAfter.Duration).To(HaveValue(Equal(168 * time.Hour)))
	}

	// What must not get a node stays Pending for the whole window.
	Consistently(func(g Gomega) {
		g.Expect(unscheduled(s, smallTooBig)).To(Equal(1), "small-flavors: 9 vCPU pod")
		g.Expect(unscheduled(s, flexibleTooBig)).To(Equal(1), "min-values: 9 vCPU pod")
		g.Expect(unscheduled(s, capped)).To(Equal(1), "cpu-limit: third pod")
		g.Expect(mustClaims(s, "capped")).To(HaveLen(2), "cpu-limit: two nodes")
		g.Expect(mustClaims(s, "small")).To(HaveLen(1))
		g.Expect(mustClaims(s, "flexible")).To(HaveLen(1))
	}).WithTimeout(pendingWindow).WithPolling(time.Second).Should(Succeed())
	Expect(karpenterPodMessages(s, capped)).To(ContainElement(ContainSubstring("exceed limits for nodepool")), "cpu-limit reported")
	Expect(karpenterPodMessages(s, flexibleTooBig)).To(ContainElement(ContainSubstring("minValues")), "min-values reported")
	for _, c := range mustClaims(s, "capped") {
		Expect(c.Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "2XS"))
	}
}

// 6b, 6c and 12d. disruption-budgets.yaml and do-not-disrupt.yaml as shipped, next to an
// unprotected pod as the control. The `default` class changes, so the three nodes drift:
//   - the control's node is replaced, which proves Karpenter is disrupting this cluster;
//   - the frozen pool's node (empty too, so consolidation wants it as well) stays, and
//     Karpenter reports the blocking budget on the NodePool;
//   - the do-not-disrupt pod's node stays (its claim Drifted all the same);
//
// for the whole window after the control moved. Lifting the budget and removing the
// annotation lets both go; the pod comes back on a node that carries the new label.
func TestExamplesDisruptionControls(t *testing.T) {
	s := harness.NewScenario(t, env)
	applyExample(s, "general-purpose.yaml")
	applyExample(s, "disruption-budgets.yaml")
	poolsReady(s, "default", "frozen")
	guarded := deploymentOf(applyExample(s, "do-not-disrupt.yaml"))
	probe := s.Deployment("frozen-probe", "frozen", 1, "1", "1Gi")
	guardedPod := s.WaitRunning(guarded, 1, harness.LaunchTimeout)[0]
	guardedNode := guardedPod.Spec.NodeName
	// After the guarded pod runs: in one batch, Karpenter counts the first claim at its
	// largest flavor (an XL) against the pool's 16 vCPU limit and defers the second pod.
	control := s.Deployment("control", "default", 1, "1", "1Gi", harness.AwayFrom(guarded.Spec.Selector.MatchLabels))
	controlNode := s.WaitRunning(control, 1, harness.LaunchTimeout)[0].Spec.NodeName
	frozenNode := s.WaitRunning(probe, 1, harness.LaunchTimeout)[0].Spec.NodeName
	Expect(controlNode).NotTo(Equal(guardedNode))
	s.Scale(probe, 0)
	Eventually(func() []corev1.Pod { return s.Pods(probe) }).WithTimeout(30 * time.Second).Should(BeEmpty())

	relabelDefaultClass(s)

	// The control moves; at every poll the two protected nodes are intact.
	var violations []string
	Eventually(func(g Gomega) {
		for _, n := range []string{frozenNode, guardedNode} {
			if why := nodeIntact(s, n); why != "" {
				violations = append(violations, why)
			}
		}
		err := env.Client.Get(s.Ctx, client.ObjectKey{Name: controlNode}, &corev1.Node{})
		g.Expect(err).To(HaveOccurred(), "the control's drifted node is gone")
		n, running := s.RunningPods(control)
		g.Expect(n).To(Equal(1))
		g.Expect(running[0].Spec.NodeName).NotTo(Equal(controlNode))
	}).WithTimeout(time.Minute + disruptTimeout).WithPolling(time.Second).Should(Succeed())
	Expect(violations).To(BeEmpty(), "a protected node was disrupted")
	for _, c := range append(mustClaims(s, "frozen"), mustClaims(s, "default")...) {
		if c.Status.NodeName == frozenNode || c.Status.NodeName == guardedNode {
			Expect(c.StatusConditions().Get(karpv1.ConditionTypeDrifted).IsTrue()).To(BeTrue(), "claim %s of %s Drifted", c.Name, c.Status.NodeName)
		}
	}
	Consistently(func(g Gomega) {
		g.Expect(nodeIntact(s, frozenNode)).To(BeEmpty(), "frozen pool's node")
		g.Expect(nodeIntact(s, guardedNode)).To(BeEmpty(), "do-not-disrupt pod's node")
	}).WithTimeout(blockWindow).WithPolling(time.Second).Should(Succeed())
	message := func(e corev1.Event) string { return e.Message }
	Expect(s.EventsSince("DisruptionBlocked", "frozen")).To(ContainElement(WithTransform(message,
		ContainSubstring("due to blocking budget"))), "budget reported on the NodePool")
	// Karpenter's DisruptionBlocked event on the node that names the annotation is not asserted:
	// core keeps one DisruptionBlocked event per node every 2 minutes, and the node's first is
	// "Node isn't initialized", emitted while it joined.
	Expect(s.Pods(guarded)).To(ConsistOf(WithTransform(func(p corev1.Pod) string { return p.Spec.NodeName }, Equal(guardedNode))))

	// Budget lifted, annotation removed: both nodes go.
	harness.Update(s, &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}}, func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = nil })
	harness.Update(s, guardedPod.DeepCopy(), func(p *corev1.Pod) { delete(p.Annotations, karpv1.DoNotDisruptAnnotationKey) })
	Eventually(func(g Gomega) {
		for _, n := range []string{frozenNode, guardedNode} {
			err := env.Client.Get(s.Ctx, client.ObjectKey{Name: n}, &corev1.Node{})
			g.Expect(err).To(HaveOccurred(), "node %s goes once unprotected", n)
		}
		n, running := s.RunningPods(guarded)
		g.Expect(n).To(Equal(1))
		g.Expect(nodeOf(s, running[0]).Labels).To(HaveKeyWithValue("team", "platform-2"))
	}).WithTimeout(disruptTimeout).WithPolling(time.Second).Should(Succeed())
}

// relabelDefaultClass changes a label of the examples' `default` CleverNodeClass, which makes
// every node of its pools drift.
func relabelDefaultClass(s *harness.Scenario) {
	harness.Update(s, &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, func(c *v1alpha1.CleverNodeClass) {
		c.Spec.Labels["team"] = "platform-2"
	})
}

// 12e. pdb.yaml as shipped: its three `web` replicas share one node of the `default` pool, so
// draining that node without the budget would stop all three. The class changes, the node
// drifts and is drained through the eviction API: the replicas move one at a time and, at
// every pod event seen by a watch, at least two are ready.
func TestExamplePDB(t *testing.T) {
	s := harness.NewScenario(t, env)
	applyExample(s, "general-purpose.yaml")
	poolsReady(s, "default")
	web := deploymentOf(applyExample(s, "pdb.yaml"))
	pods := s.WaitRunning(web, 3, harness.LaunchTimeout)
	oldNode := pods[0].Spec.NodeName
	for _, p := range pods {
		Expect(p.Spec.NodeName).To(Equal(oldNode), "the three replicas share one node, or the budget proves nothing")
	}

	w, err := env.Client.Watch(s.Ctx, &corev1.PodList{}, client.InNamespace(s.Namespace), client.MatchingLabels(web.Spec.Selector.MatchLabels))
	Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var mu sync.Mutex
	ready := map[string]bool{}
	lowest := -1
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			ready[p.Name] = ev.Type != watch.Deleted && p.DeletionTimestamp == nil && harness.PodReady(p)
			n := 0
			for _, r := range ready {
				if r {
					n++
				}
			}
			if lowest >= 0 && n < lowest || lowest < 0 && n == 3 {
				lowest = n
			}
			mu.Unlock()
		}
	}()
	Eventually(func() int { mu.Lock(); defer mu.Unlock(); return lowest }).WithTimeout(10*time.Second).Should(Equal(3), "the watch sees three ready replicas")

	relabelDefaultClass(s)
	Eventually(func(g Gomega) {
		err := env.Client.Get(s.Ctx, client.ObjectKey{Name: oldNode}, &corev1.Node{})
		g.Expect(err).To(HaveOccurred(), "the drifted node is gone")
		n, running := s.RunningPods(web)
		g.Expect(n).To(Equal(3))
		for _, p := range running {
			g.Expect(p.Spec.NodeName).NotTo(Equal(oldNode))
		}
	}).WithTimeout(time.Minute + disruptTimeout).WithPolling(time.Second).Should(Succeed())
	mu.Lock()
	defer mu.Unlock()
	Expect(lowest).To(Equal(2), "ready replicas never below the budget's two, and the drain did evict")
}
