package restart

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// A managed group resized out of band puts a second node in the cluster that no NodeClaim
// owns. The platform copies spec.labels to it, so it must not carry Karpenter's keys: after a
// controller restart core's cluster state stays synced and a new pod is provisioned at once
// (seen live with karpenter.sh/nodepool in spec.labels: unsynced for minutes).
func TestRestartWithAResizedGroupKeepsProvisioning(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`(?i)resized`)
	// The quota engine charges the resize like any node: out of CKE's default quota's way
	// (the harness puts it back), this scenario is about core's cluster state, not the quota.
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.QuotaCPU, o.QuotaRAMGB = 200, 200 })
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)
	first := s.Deployment("before", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(first, 1, harness.LaunchTimeout)
	g := s.PoolGroups(pool.Name)[0]
	harness.Update(s, &g, func(g *ngv1.NodeGroup) { g.Spec.NodeCount = 2 })
	extra := &corev1.Node{}
	Eventually(func() error {
		return env.Client.Get(s.Ctx, client.ObjectKey{Name: ngv1.NodeName(g.Name, 1)}, extra)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	Expect(extra.Labels).NotTo(HaveKey(karpv1.NodePoolLabelKey), "the out-of-band node is not one of Karpenter's")
	Expect(extra.Spec.ProviderID).To(BeEmpty(), "one provider ID is never stamped on two nodes")

	s.RestartController(nil)
	Eventually(func() float64 {
		return s.Metric("karpenter_cluster_state_synced", nil)
	}).WithTimeout(30*time.Second).WithPolling(500*time.Millisecond).Should(Equal(1.0), "core's cluster state synced after the restart")
	second := s.Deployment("after", pool.Name, 1, "1", "1Gi", harness.AwayFrom(first.Spec.Selector.MatchLabels))
	s.WaitRunning(second, 1, harness.LaunchTimeout)
	// Give the extra node back before cleanup, as a user who resized by mistake would.
	harness.Update(s, &g, func(g *ngv1.NodeGroup) { g.Spec.NodeCount = 1 })
}
