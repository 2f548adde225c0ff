package harness

import (
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// PoolClaims lists the NodeClaims of a NodePool, terminating ones included.
func (s *Scenario) PoolClaims(pool string) []karpv1.NodeClaim {
	s.T.Helper()
	claims, err := s.Env.NodeClaims(s.Ctx, pool)
	s.must(err)
	return claims
}

// WaitInitializedClaims waits for exactly n NodeClaims of the pool, each initialized with its
// node, and returns them.
func (s *Scenario) WaitInitializedClaims(pool string, n int) []karpv1.NodeClaim {
	s.T.Helper()
	var claims []karpv1.NodeClaim
	s.G.Eventually(func(g gomega.Gomega) {
		var err error
		claims, err = s.Env.NodeClaims(s.Ctx, pool)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(claims).To(gomega.HaveLen(n), "NodeClaims of the pool")
		for _, c := range claims {
			g.Expect(c.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue()).To(gomega.BeTrue(), "NodeClaim %s initialized", c.Name)
			g.Expect(c.Status.NodeName).NotTo(gomega.BeEmpty(), "NodeClaim %s node", c.Name)
		}
	}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(gomega.Succeed())
	return claims
}

// NodeOf returns the node a pod runs on.
func (s *Scenario) NodeOf(p corev1.Pod) *corev1.Node {
	s.T.Helper()
	n := &corev1.Node{}
	s.must(s.Env.Client.Get(s.Ctx, client.ObjectKey{Name: p.Spec.NodeName}, n))
	return n
}

// FlavorOfNode is the flavor a node was launched as (its instance-type label).
func FlavorOfNode(n *corev1.Node) string { return n.Labels[corev1.LabelInstanceTypeStable] }
