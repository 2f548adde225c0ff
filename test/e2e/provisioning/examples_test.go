package provisioning

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Examples/general-purpose.yaml + examples/inflate.yaml: three inflate pods run on one
// 2XS carrying the class's label; scaled to zero, the node goes after consolidateAfter (30 s).
func TestExampleGeneralPurposeInflate(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.ApplyExample("general-purpose.yaml")
	d := s.DeploymentIn(s.ApplyExample("inflate.yaml"))
	Expect(d).NotTo(BeNil())
	s.Scale(d, 3)
	s.WaitRunning(d, 3, harness.LaunchTimeout)
	Expect(harness.FlavorsOf(s.PoolGroups("default"))).To(ConsistOf("2XS"))
	nodes, err := env.PoolNodes(s.Ctx, "default")
	Expect(err).NotTo(HaveOccurred())
	Expect(nodes).To(HaveLen(1))
	Expect(nodes[0].Labels).To(HaveKeyWithValue("team", "platform"))

	s.Scale(d, 0)
	Eventually(func(g Gomega) {
		g.Expect(s.PoolGroups("default")).To(BeEmpty())
	}).WithTimeout(harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
}

// Examples/team-pool.yaml + examples/team-workload.yaml: the team's pod, which tolerates
// the team taint and selects the team label, lands on an S (the pool allows S and M) that
// carries both.
func TestExampleTeamPool(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.ApplyExample("team-pool.yaml")
	d := s.DeploymentIn(s.ApplyExample("team-workload.yaml"))
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	groups := s.PoolGroups("team-data")
	Expect(harness.FlavorsOf(groups)).To(ConsistOf("S"))
	Expect(groups[0].Spec.Labels).To(HaveKeyWithValue("example.com/team", "data"))
	nodes, err := env.PoolNodes(s.Ctx, "team-data")
	Expect(err).NotTo(HaveOccurred())
	Expect(nodes).To(HaveLen(1))
	Expect(nodes[0].Labels).To(HaveKeyWithValue("example.com/team", "data"))
	Expect(nodes[0].Spec.Taints).To(ContainElement(corev1.Taint{Key: "example.com/team", Value: "data", Effect: corev1.TaintEffectNoSchedule}))
}
