package launch

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// A flavor the NodeGroup API refuses (the served CRD's enum, HTTP 422; test/e2e's
// TestFlavorTheAPIRefusesIsOfferedAsUnavailable covers the refusal itself) stays unavailable
// when a node is deleted. Deleting a node frees quota, which says nothing about a flavor the
// apiserver does not serve: the pod that comes back after the deletion lands on the 2XS at
// once, with no second try of the unserved flavor.
func TestUnservedFlavorStaysUnavailableAfterANodeDeletion(t *testing.T) {
	s := harness.NewScenario(t, env)
	env.Cluster.Operator().Configure(harness.PlatformQuirks)
	s.RestartWithUnservedFlavor()
	tries := func() float64 {
		return s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"flavor": harness.UnservedFlavor, "outcome": cloudprovider.OutcomeFlavorUnsupported})
	}

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{harness.UnservedFlavor, "2XS"}, 5*time.Second, harness.OnDemand)
	d := s.Deployment("comes-back", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, 2*harness.LaunchTimeout)
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("2XS"))
	before := tries()
	Expect(before).To(BeNumerically(">=", 1), "the unserved flavor was tried: Karpenter takes the cheapest first")

	// The pod goes, its empty node is consolidated away: a successful delete.
	s.Scale(d, 0)
	Eventually(func(g Gomega) {
		g.Expect(s.PoolGroups(pool.Name)).To(BeEmpty(), "NodeGroups of the pool")
		nodes, err := env.PoolNodes(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes).To(BeEmpty(), "nodes of the pool")
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

	s.Scale(d, 1)
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("2XS"))
	Expect(tries()).To(Equal(before), "launches of the unserved flavor after the node deletion")
}
