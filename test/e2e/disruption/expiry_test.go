package disruption

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Karpenter's disruption controls (expireAfter, budgets, do-not-disrupt) on our nodes.

// blockWindow is how long a blocked disruption is watched not happening once Karpenter has
// disrupted an unblocked peer: the peer proves the disruption loop saw every candidate, the
// window covers two more of its 10 s passes.
const blockWindow = 20 * time.Second

func expireAfter(d string) harness.PoolOption {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration(d)
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

// ExpireAfter: a node older than its pool's expireAfter (30 s) is deleted, forcefully, and
// its pod runs again on a new node.
func TestExpireAfter(t *testing.T) {
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Hour, harness.OnDemand, expireAfter("30s"))
	d := s.Deployment("ephemeral", pool.Name, 1, "1", "1Gi")
	pods := s.WaitRunning(d, 1, harness.LaunchTimeout)
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
	}).WithTimeout(30*time.Second + harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	Expect(s.Metric("karpenter_nodeclaims_disrupted_total", map[string]string{"reason": "expired", "nodepool": pool.Name})).To(BeNumerically(">=", 1))
}
