package disruption

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Consolidation, delete: one pod per node, 3 → 1 replicas; the two empty nodes go, the
// survivor keeps its pod.
func TestConsolidationDelete(t *testing.T) {
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, 5*time.Second)
	d := s.Deployment("spread", pool.Name, 3, "1", "1Gi", harness.OnePerNode)
	s.WaitRunning(d, 3, harness.LaunchTimeout)
	Expect(harness.FlavorsOf(s.PoolGroups(pool.Name))).To(ConsistOf("2XS", "2XS", "2XS"))
	deletesBefore := s.Metric("karpenter_voluntary_disruption_decisions_total", map[string]string{"decision": "delete"})

	s.Scale(d, 1)
	Eventually(func(g Gomega) {
		g.Expect(s.PoolGroups(pool.Name)).To(HaveLen(1), "NodeGroups of the pool")
		nodes, err := env.PoolNodes(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes).To(HaveLen(1), "nodes of the pool")
		claims, err := env.NodeClaims(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(claims).To(HaveLen(1), "NodeClaims of the pool")
	}).WithTimeout(harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	pods := s.WaitRunning(d, 1, 30*time.Second)
	Expect(pods[0].Spec.NodeName).To(Equal(ngv1.NodeName(s.PoolGroups(pool.Name)[0].Name, 0)))
	Expect(s.Metric("karpenter_voluntary_disruption_decisions_total", map[string]string{"decision": "delete"})).To(BeNumerically(">", deletesBefore))
}

// Consolidation, replace: five pods need an XS; down to one pod, a cheaper 2XS takes over
// and the XS goes.
func TestConsolidationReplace(t *testing.T) {
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, 5*time.Second, harness.OnDemand)
	d := s.Deployment("shrink", pool.Name, 5, "1", "1Gi")
	s.WaitRunning(d, 5, harness.LaunchTimeout)
	Expect(harness.FlavorsOf(s.PoolGroups(pool.Name))).To(ConsistOf("XS"))
	replacesBefore := s.Metric("karpenter_voluntary_disruption_decisions_total", map[string]string{"decision": "replace"})

	s.Scale(d, 1)
	Eventually(func(g Gomega) {
		groups, err := env.PoolNodeGroups(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(harness.FlavorsOf(groups)).To(ConsistOf("2XS"))
		nodes, err := env.PoolNodes(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes).To(HaveLen(1))
		g.Expect(nodes[0].Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "2XS"))
	}).WithTimeout(harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	pods := s.WaitRunning(d, 1, time.Minute)
	Expect(pods[0].Spec.NodeName).To(Equal(ngv1.NodeName(s.PoolGroups(pool.Name)[0].Name, 0)))
	Expect(s.Metric("karpenter_voluntary_disruption_decisions_total", map[string]string{"decision": "replace"})).To(BeNumerically(">", replacesBefore))
}

// Scale to zero: the last node goes and no NodeGroup of the pool remains.
func TestScaleToZero(t *testing.T) {
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, 5*time.Second)
	d := s.Deployment("zero", pool.Name, 2, "1", "1Gi")
	s.WaitRunning(d, 2, harness.LaunchTimeout)
	groups := s.PoolGroups(pool.Name)
	Expect(groups).To(HaveLen(1))

	s.Scale(d, 0)
	Eventually(func(g Gomega) {
		g.Expect(s.PoolGroups(pool.Name)).To(BeEmpty(), "NodeGroups of the pool")
		nodes, err := env.PoolNodes(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes).To(BeEmpty(), "nodes of the pool")
		claims, err := env.NodeClaims(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(claims).To(BeEmpty(), "NodeClaims of the pool")
		err = env.Client.Get(s.Ctx, client.ObjectKey{Name: ngv1.NodeName(groups[0].Name, 0)}, &corev1.Node{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the node is gone")
	}).WithTimeout(harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	all, err := env.NodeGroups(s.Ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(all).To(BeEmpty(), "no managed NodeGroup remains in the cluster")
}
