package e2e

import (
	"fmt"
	"maps"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// §6: Karpenter's disruption controls (expireAfter, budgets, do-not-disrupt) on our nodes.

// blockWindow is how long a blocked disruption is watched not happening. Unblocked, the same
// empty node goes in ≈ 20–30 s (consolidateAfter 5 s, then Karpenter's 10 s disruption loop
// and validation), so 45 s covers that path more than once.
const blockWindow = 45 * time.Second

func expireAfter(d string) harness.PoolOption {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration(d)
	}
}

func budgets(b ...karpv1.Budget) harness.PoolOption {
	return func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = b }
}

// withPodLabels adds labels to the pod template only (the helper shares the selector's map).
func withPodLabels(extra map[string]string) harness.WorkloadOption {
	return func(d *appsv1.Deployment) {
		l := maps.Clone(d.Spec.Template.Labels)
		maps.Copy(l, extra)
		d.Spec.Template.Labels = l
	}
}

// nodeIntact says why a node is not intact (gone, deleting, or its claim deleting), or "".
func nodeIntact(s *harness.Scenario, name string) string {
	n := &corev1.Node{}
	if err := env.Client.Get(s.Ctx, client.ObjectKey{Name: name}, n); err != nil {
		return fmt.Sprintf("node %s: %v", name, err)
	}
	if n.DeletionTimestamp != nil {
		return "node " + name + " is deleting"
	}
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return "node " + name + " is tainted for disruption"
		}
	}
	claims, err := env.NodeClaims(s.Ctx, "")
	if err != nil {
		return err.Error()
	}
	for _, c := range claims {
		if c.Status.NodeName == name && c.DeletionTimestamp != nil {
			return "claim " + c.Name + " of node " + name + " is deleting"
		}
	}
	return ""
}

// 6a. expireAfter: a node older than its pool's expireAfter (30 s) is deleted, forcefully, and
// its pod runs again on a new node.
func TestExpireAfter(t *testing.T) {
	s := env.Scenario(t)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Hour, harness.OnDemand, expireAfter("30s"))
	d := s.Deployment("ephemeral", pool.Name, 1, "1", "1Gi")
	pods := s.WaitRunning(d, 1, launchTimeout)
	oldNode := pods[0].Spec.NodeName
	claims, err := env.NodeClaims(s.Ctx, pool.Name)
	Expect(err).NotTo(HaveOccurred())
	Expect(claims).To(HaveLen(1))
	oldClaim := claims[0]
	Expect(oldClaim.Spec.ExpireAfter.Duration).NotTo(BeNil())
	Expect(*oldClaim.Spec.ExpireAfter.Duration).To(Equal(30 * time.Second))

	Eventually(func(g Gomega) {
		err := env.Client.Get(s.Ctx, client.ObjectKeyFromObject(&oldClaim), &karpv1.NodeClaim{})
		g.Expect(err).To(HaveOccurred(), "expired claim gone")
		err = env.Client.Get(s.Ctx, client.ObjectKey{Name: oldNode}, &corev1.Node{})
		g.Expect(err).To(HaveOccurred(), "expired node gone")
		n, running := s.RunningPods(d)
		g.Expect(n).To(Equal(1))
		g.Expect(running[0].Spec.NodeName).NotTo(Equal(oldNode))
	}).WithTimeout(30*time.Second + disruptTimeout).WithPolling(time.Second).Should(Succeed())
	Expect(s.Metric("karpenter_nodeclaims_disrupted_total", map[string]string{"reason": "expired", "nodepool": pool.Name})).To(BeNumerically(">=", 1))
}

// 6b. A `nodes: "0"` budget blocks the consolidation of an empty node for the whole
// observation window (Karpenter says so on the NodePool); with the budget lifted the node goes.
func TestDisruptionBudgetBlocks(t *testing.T) {
	s := env.Scenario(t)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, 5*time.Second, harness.OnDemand, budgets(karpv1.Budget{Nodes: "0"}))
	d := s.Deployment("idle", pool.Name, 1, "1", "1Gi")
	pods := s.WaitRunning(d, 1, launchTimeout)
	node := pods[0].Spec.NodeName
	s.Scale(d, 0)
	Eventually(func() []corev1.Pod { return s.Pods(d) }).WithTimeout(30 * time.Second).Should(BeEmpty())
	emptySince := time.Now()

	Consistently(func() string { return nodeIntact(s, node) }).
		WithTimeout(blockWindow).WithPolling(time.Second).Should(BeEmpty(), "the empty node stays while the budget is 0")
	Expect(s.EventsSince("DisruptionBlocked", pool.Name)).To(ContainElement(WithTransform(func(e corev1.Event) string { return e.Message },
		ContainSubstring("due to blocking budget"))), "Karpenter reports the blocking budget on the NodePool")

	Eventually(func() error {
		cur := &karpv1.NodePool{}
		if err := env.Client.Get(s.Ctx, client.ObjectKeyFromObject(pool), cur); err != nil {
			return err
		}
		cur.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
		return env.Client.Update(s.Ctx, cur)
	}).WithTimeout(10 * time.Second).Should(Succeed())
	lifted := time.Now()
	Eventually(func(g Gomega) {
		g.Expect(groupsOf(s, pool.Name)).To(BeEmpty(), "NodeGroups of the pool")
		err := env.Client.Get(s.Ctx, client.ObjectKey{Name: node}, &corev1.Node{})
		g.Expect(err).To(HaveOccurred(), "the node is gone")
	}).WithTimeout(disruptTimeout).WithPolling(time.Second).Should(Succeed())
	t.Logf("empty for %s under the 0 budget; gone %s after the budget was lifted",
		lifted.Sub(emptySince).Round(time.Second), time.Since(lifted).Round(time.Second))
}

// 6c. karpenter.sh/do-not-disrupt: both nodes of a pool drift; the one without a protected pod
// is replaced, the one hosting the annotated pod is not touched (Karpenter says why) until the
// annotation is removed, then it is replaced too.
func TestDoNotDisrupt(t *testing.T) {
	s := env.Scenario(t)
	class := s.NodeClass("", map[string]string{"example.com/rev": "one"})
	pool := s.NodePool("", class, nil, time.Hour, harness.OnDemand)
	apart := func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey:   corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/spread": "dnd"}},
			}},
		}
	}
	guardedD := s.Deployment("guarded", pool.Name, 1, "1", "1Gi", withPodLabels(map[string]string{"example.com/spread": "dnd"}), apart,
		func(d *appsv1.Deployment) {
			d.Spec.Template.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		})
	freeD := s.Deployment("free", pool.Name, 1, "1", "1Gi", withPodLabels(map[string]string{"example.com/spread": "dnd"}), apart)
	guardedPod := s.WaitRunning(guardedD, 1, launchTimeout)[0]
	freePod := s.WaitRunning(freeD, 1, launchTimeout)[0]
	guardedNode, freeNode := guardedPod.Spec.NodeName, freePod.Spec.NodeName
	Expect(guardedNode).NotTo(Equal(freeNode))

	Eventually(func() error {
		cur := &v1alpha1.CleverNodeClass{}
		if err := env.Client.Get(s.Ctx, client.ObjectKeyFromObject(class), cur); err != nil {
			return err
		}
		cur.Spec.Labels["example.com/rev"] = "two"
		return env.Client.Update(s.Ctx, cur)
	}).WithTimeout(10 * time.Second).Should(Succeed())

	// The free node is replaced; at every poll the guarded node is intact.
	var violations []string
	Eventually(func(g Gomega) {
		if why := nodeIntact(s, guardedNode); why != "" {
			violations = append(violations, why)
		}
		err := env.Client.Get(s.Ctx, client.ObjectKey{Name: freeNode}, &corev1.Node{})
		g.Expect(err).To(HaveOccurred(), "the unprotected drifted node is gone")
		n, running := s.RunningPods(freeD)
		g.Expect(n).To(Equal(1))
		g.Expect(running[0].Spec.NodeName).NotTo(Equal(freeNode))
	}).WithTimeout(time.Minute + disruptTimeout).WithPolling(time.Second).Should(Succeed())
	Expect(violations).To(BeEmpty(), "the node hosting the do-not-disrupt pod was disrupted")
	// Both claims drifted: the guarded one is held back by the annotation, not by a lack of drift.
	for _, c := range mustClaims(s, pool.Name) {
		if c.Status.NodeName == guardedNode {
			Expect(c.StatusConditions().Get(karpv1.ConditionTypeDrifted).IsTrue()).To(BeTrue(), "the guarded claim is Drifted too")
		}
	}
	Consistently(func() string { return nodeIntact(s, guardedNode) }).
		WithTimeout(20 * time.Second).WithPolling(time.Second).Should(BeEmpty())
	Eventually(func() []corev1.Event { return s.EventsSince("DisruptionBlocked", guardedNode) }).WithTimeout(30 * time.Second).
		Should(ContainElement(WithTransform(func(e corev1.Event) string { return e.Message }, ContainSubstring("do-not-disrupt"))))
	Expect(guardedPod.Spec.NodeName).To(Equal(guardedNode))
	Expect(s.Pods(guardedD)).To(ConsistOf(WithTransform(func(p corev1.Pod) string { return p.Spec.NodeName }, Equal(guardedNode))))

	// Without the annotation, the guarded node drifts away like the other.
	Eventually(func() error {
		p := &corev1.Pod{}
		if err := env.Client.Get(s.Ctx, client.ObjectKeyFromObject(&guardedPod), p); err != nil {
			return err
		}
		delete(p.Annotations, karpv1.DoNotDisruptAnnotationKey)
		return env.Client.Update(s.Ctx, p)
	}).WithTimeout(10 * time.Second).Should(Succeed())
	Eventually(func(g Gomega) {
		err := env.Client.Get(s.Ctx, client.ObjectKey{Name: guardedNode}, &corev1.Node{})
		g.Expect(err).To(HaveOccurred(), "the formerly protected node is gone")
		n, running := s.RunningPods(guardedD)
		g.Expect(n).To(Equal(1))
		g.Expect(running[0].Spec.NodeName).NotTo(Equal(guardedNode))
	}).WithTimeout(time.Minute + disruptTimeout).WithPolling(time.Second).Should(Succeed())
	Eventually(func(g Gomega) {
		groups := groupsOf(s, pool.Name)
		g.Expect(groups).To(HaveLen(2))
		for _, ng := range groups {
			g.Expect(ng.Spec.Labels).To(HaveKeyWithValue("example.com/rev", "two"), "group %s", ng.Name)
		}
	}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
}

func mustClaims(s *harness.Scenario, pool string) []karpv1.NodeClaim {
	s.T.Helper()
	claims, err := env.NodeClaims(s.Ctx, pool)
	Expect(err).NotTo(HaveOccurred())
	return claims
}
