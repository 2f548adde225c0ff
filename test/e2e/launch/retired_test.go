package launch

import (
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// retireFlavor makes the fake price API stop listing flavor in every topology.
func retireFlavor(flavor string) {
	// Only the legacy product listing can retire a flavor: today's platform answers it 401 and
	// availability then comes from the catalogue. The scenario's Prices.Reset restores the 401.
	env.Prices.SetLegacyProduct(true)
	for _, topo := range env.Prices.State().Topologies {
		env.Prices.SetAvailableFlavors(topo.Topology, slices.DeleteFunc(slices.Clone(topo.AvailableFlavors), func(f string) bool { return f == flavor }))
	}
}

// restartAndRefresh restarts the controller and waits for its start-up price refresh to have
// been applied.
func restartAndRefresh(s *harness.Scenario, overrides map[string]string) {
	s.T.Helper()
	s.RestartController(overrides)
	Eventually(func() float64 {
		return s.Metric("karpenter_clevercloud_pricing_last_success_timestamp_seconds", nil)
	}).WithTimeout(time.Minute).WithPolling(250*time.Millisecond).Should(BeNumerically(">", 0), "a successful price refresh after the restart")
}

// A flavor leaves the price API's available-flavor lists while a node of that flavor runs:
// after the controller's refresh (at start), Get/List keep working, the claim is Drifted with
// reason FlavorRetired, and a node of another flavor takes over the pod.
func TestFlavorRetired(t *testing.T) {
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Hour, harness.OnDemand)
	d := s.Deployment("retiree", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	old := s.PoolGroups(pool.Name)
	Expect(harness.FlavorsOf(old)).To(ConsistOf("2XS"))
	oldNode := ngv1.NodeName(old[0].Name, 0)

	retireFlavor("2XS")
	for _, topo := range env.Prices.State().Topologies {
		Expect(topo.AvailableFlavors).NotTo(ContainElement("2XS"), "topology %s", topo.Topology)
	}
	// The next scenarios need 2XS back: put the API back and refresh before the scenario's
	// cleanup (cleanups run last-registered first).
	t.Cleanup(func() {
		env.Prices.Reset()
		restartAndRefresh(s, nil)
	})
	restartAndRefresh(s, nil)

	Eventually(func(g Gomega) {
		nc := &karpv1.NodeClaim{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: old[0].Name}, nc)).To(Succeed())
		cond := nc.StatusConditions().Get(karpv1.ConditionTypeDrifted)
		g.Expect(cond).NotTo(BeNil(), "Drifted condition")
		g.Expect(cond.IsTrue()).To(BeTrue(), "claim Drifted")
		g.Expect(cond.Reason).To(Equal("FlavorRetired"))
		// Get still answers for the retired flavor: the claim keeps its instance.
		g.Expect(nc.Status.ProviderID).To(Equal(v1alpha1.ProviderIDPrefix + old[0].Name))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	var fresh ngv1.NodeGroup
	Eventually(func(g Gomega) {
		groups := s.PoolGroups(pool.Name)
		g.Expect(groups).To(HaveLen(1))
		g.Expect(groups[0].Name).NotTo(Equal(old[0].Name), "the retired group is replaced")
		fresh = groups[0]
		err := env.Client.Get(s.Ctx, client.ObjectKey{Name: oldNode}, &corev1.Node{})
		g.Expect(err).To(HaveOccurred(), "old node gone")
	}).WithTimeout(harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	Expect(fresh.Spec.Flavor).NotTo(Equal("2XS"))
	Expect(fresh.Spec.Flavor).To(Equal("XS"), "the cheapest flavor still offered")
	pods := s.WaitRunning(d, 1, time.Minute)
	Expect(pods[0].Spec.NodeName).To(Equal(ngv1.NodeName(fresh.Name, 0)))
	node := &corev1.Node{}
	Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, node)).To(Succeed())
	Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "XS"))
	Expect(s.Metric("karpenter_voluntary_disruption_decisions_total", map[string]string{"reason": "drifted"})).To(BeNumerically(">=", 1))
	// Get/List kept working on the retired flavor: nothing was taken for vanished or reaped
	// as garbage (the controller restarted, so these count since the refresh), and the log has
	// no error line (checked at cleanup).
	Expect(s.Metric("karpenter_clevercloud_nodegroup_vanished_total", nil)).To(BeZero())
	Expect(s.Metric("karpenter_clevercloud_nodegroup_garbage_collected_total", nil)).To(BeZero())
}
