package disruption

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Disruption-budgets.yaml and do-not-disrupt.yaml as shipped, next to an
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
	s.ApplyExample("general-purpose.yaml")
	s.ApplyExample("disruption-budgets.yaml")
	s.WaitPoolsReady("default", "frozen")
	guarded := s.DeploymentIn(s.ApplyExample("do-not-disrupt.yaml"))
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
	}).WithTimeout(time.Minute + harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	Expect(violations).To(BeEmpty(), "a protected node was disrupted")
	for _, c := range append(s.PoolClaims("frozen"), s.PoolClaims("default")...) {
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
		g.Expect(s.NodeOf(running[0]).Labels).To(HaveKeyWithValue("team", "platform-2"))
	}).WithTimeout(harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
}

// relabelDefaultClass changes a label of the examples' `default` CleverNodeClass, which makes
// every node of its pools drift.
func relabelDefaultClass(s *harness.Scenario) {
	harness.Update(s, &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, func(c *v1alpha1.CleverNodeClass) {
		c.Spec.Labels["team"] = "platform-2"
	})
}

// Pdb.yaml as shipped: its three `web` replicas share one node of the `default` pool, so
// draining that node without the budget would stop all three. The class changes, the node
// drifts and is drained through the eviction API: the replicas move one at a time and, at
// every pod event seen by a watch, at least two are ready.
func TestExamplePDB(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.ApplyExample("general-purpose.yaml")
	s.WaitPoolsReady("default")
	web := s.DeploymentIn(s.ApplyExample("pdb.yaml"))
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
	}).WithTimeout(time.Minute + harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	mu.Lock()
	defer mu.Unlock()
	Expect(lowest).To(Equal(2), "ready replicas never below the budget's two, and the drain did evict")
}
