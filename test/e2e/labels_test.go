package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

func nodeSelector(key, value string) harness.WorkloadOption {
	return func(d *appsv1.Deployment) {
		if d.Spec.Template.Spec.NodeSelector == nil {
			d.Spec.Template.Spec.NodeSelector = map[string]string{}
		}
		d.Spec.Template.Spec.NodeSelector[key] = value
	}
}

// CKE does not stamp topology labels on its nodes: zone and region
// reach the node through the NodeClaim at registration. A pod that selects the region gets
// exactly one node (before, one such pod made Karpenter launch three VMs and never ran).
func TestRegionSelectorGetsExactlyOneNode(t *testing.T) {
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)
	created := s.WatchGroupCreations(pool.Name)
	d := s.Deployment("in-par", pool.Name, 1, "1", "1Gi", nodeSelector(corev1.LabelTopologyRegion, "par"))

	pods := s.WaitRunning(d, 1, harness.LaunchTimeout)
	node := &corev1.Node{}
	Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, node)).To(Succeed())
	Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelTopologyRegion, "par"))
	Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelTopologyZone, "par"))
	Expect(created.Count()).To(Equal(1), "NodeGroups created for one pod")
	// The group itself asks the platform for no topology label nor any key Karpenter owns.
	g := s.PoolGroups(pool.Name)[0]
	for k := range g.Spec.Labels {
		Expect(k).NotTo(HavePrefix("karpenter.sh/"))
		Expect(k).NotTo(HavePrefix("topology.kubernetes.io/"))
	}
}

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

// A CleverNodeClass may not set a label Karpenter, the provider or the platform owns: the
// bundle's CRD refuses it, naming the label.
func TestCleverNodeClassRefusesOwnedLabels(t *testing.T) {
	s := harness.NewScenario(t, env)
	for _, key := range []string{corev1.LabelTopologyZone, karpv1.NodePoolLabelKey, "clever-cloud.com/flavor", v1alpha1.LabelNodeClaim} {
		nc := &v1alpha1.CleverNodeClass{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name + "-owned"},
			Spec:       v1alpha1.CleverNodeClassSpec{Labels: map[string]v1alpha1.LabelValue{key: "elsewhere"}},
		}
		err := env.Client.Create(s.Ctx, nc)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "label %s: %v", key, err)
		Expect(err.Error()).To(ContainSubstring(key))
	}
}
