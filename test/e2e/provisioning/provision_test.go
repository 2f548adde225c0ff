package provisioning

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// A pending pod gets the cheapest fitting flavor, on a NodeGroup shaped as the platform
// needs it, whose node registers with our provider ID, the class's labels and Karpenter's,
// loses its startup taint and runs the pod.
func TestProvision(t *testing.T) {
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", map[string]string{"example.com/team": "platform"})
	pool := s.NodePool("", class, nil, time.Minute)
	d := s.Deployment("inflate", pool.Name, 1, "1", "1Gi")

	pods := s.WaitRunning(d, 1, harness.LaunchTimeout)

	var claim karpv1.NodeClaim
	Eventually(func(g Gomega) {
		claims, err := env.NodeClaims(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(claims).To(HaveLen(1))
		claim = claims[0]
		g.Expect(claim.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue()).To(BeTrue(), "NodeClaim initialized")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	groups, err := env.PoolNodeGroups(s.Ctx, pool.Name)
	Expect(err).NotTo(HaveOccurred())
	Expect(groups).To(HaveLen(1))
	g := groups[0]

	// Cheapest flavor that fits 1 CPU / 1Gi: 2XS (0.0333 EUR/h).
	Expect(g.Spec.Flavor).To(Equal("2XS"))
	Expect(g.Name).To(Equal(claim.Name))
	Expect(g.Spec.NodeCount).To(BeEquivalentTo(1))
	// Ownership is the claim's UID, never an owner reference (see TestForegroundDeletionDrainsFirst).
	Expect(g.OwnerReferences).To(BeEmpty())
	Expect(g.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClaimUID, string(claim.UID)))
	Expect(g.Labels).To(HaveKeyWithValue(v1alpha1.LabelNodeClaim, claim.Name))
	Expect(g.Labels).To(HaveKeyWithValue(v1alpha1.LabelNodeClass, class.Name))
	Expect(g.Labels).To(HaveKeyWithValue(karpv1.NodePoolLabelKey, pool.Name))
	Expect(g.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClassHash, class.Hash()))
	Expect(g.Spec.Labels).To(HaveKeyWithValue("example.com/team", "platform"))
	Expect(g.Spec.Taints).To(ContainElement(ngv1.Taint{Key: karpv1.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}))
	// The node registers while the group is still Creating: Synced follows.
	Eventually(func() (string, error) {
		got := &ngv1.NodeGroup{}
		err := env.Client.Get(s.Ctx, client.ObjectKeyFromObject(&g), got)
		return got.Status.Phase, err
	}).WithTimeout(30 * time.Second).Should(Equal(ngv1.PhaseSynced))

	node := &corev1.Node{}
	Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: ngv1.NodeName(g.Name, 0)}, node)).To(Succeed())
	Expect(node.Spec.ProviderID).To(Equal(v1alpha1.ProviderIDPrefix + g.Name))
	Expect(claim.Status.ProviderID).To(Equal(node.Spec.ProviderID))
	Expect(claim.Status.NodeName).To(Equal(node.Name))
	Expect(sim.NodeReady(node)).To(BeTrue())
	Expect(node.Labels).To(SatisfyAll(
		HaveKeyWithValue(karpv1.NodePoolLabelKey, pool.Name),
		HaveKeyWithValue(corev1.LabelInstanceTypeStable, "2XS"),
		HaveKeyWithValue("clever-cloud.com/flavor", "2XS"),
		HaveKeyWithValue("clever-cloud.com/nodegroup", g.Name),
		HaveKeyWithValue("example.com/team", "platform"),
		HaveKeyWithValue(karpv1.NodeRegisteredLabelKey, "true"),
		HaveKeyWithValue(karpv1.NodeInitializedLabelKey, "true"),
		HaveKeyWithValue(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeOnDemand),
		HaveKeyWithValue(corev1.LabelTopologyZone, "par"),
	))
	for _, taint := range node.Spec.Taints {
		Expect(taint.Key).NotTo(Equal(karpv1.UnregisteredTaintKey), "startup taint still on the node")
	}
	for _, cond := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		Expect(claim.StatusConditions().Get(cond).IsTrue()).To(BeTrue(), "NodeClaim condition %s", cond)
	}
	Expect(pods[0].Spec.NodeName).To(Equal(node.Name))
	Expect(s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"flavor": "2XS", "outcome": "Accepted"})).To(BeNumerically(">=", 1))
}

// Real prices decide the packing: three 1 CPU / 1500Mi pods fit one XS (0.0611 EUR/h),
// which is cheaper than the two 2XS (2 × 0.0333) they would otherwise need.
func TestBinPacking(t *testing.T) {
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)
	d := s.Deployment("pack", pool.Name, 3, "1", "1500Mi")

	pods := s.WaitRunning(d, 3, harness.LaunchTimeout)
	groups, err := env.PoolNodeGroups(s.Ctx, pool.Name)
	Expect(err).NotTo(HaveOccurred())
	Expect(groups).To(HaveLen(1), "one NodeGroup for the three pods")
	Expect(groups[0].Spec.Flavor).To(Equal("XS"))
	for _, p := range pods {
		Expect(p.Spec.NodeName).To(Equal(ngv1.NodeName(groups[0].Name, 0)))
	}
	// The price the scheduler used is the public one, read from the (fake) price API.
	Expect(s.Metric("karpenter_clevercloud_catalog_flavor_price_hourly", map[string]string{"flavor": "XS"})).To(BeNumerically("~", 0.0611, 0.00005))
	Expect(s.Metric("karpenter_clevercloud_catalog_flavor_price_hourly", map[string]string{"flavor": "2XS"})).To(BeNumerically("~", 0.0333, 0.00005))
}
