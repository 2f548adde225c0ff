package headroom

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/garbagecollection"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// usage reads what the controller counts of the organisation quota: vCPU, GB.
func usage(s *harness.Scenario) [2]float64 {
	return [2]float64{
		s.Metric("karpenter_clevercloud_quota_usage", map[string]string{"resource": "cpu"}),
		s.Metric("karpenter_clevercloud_quota_usage", map[string]string{"resource": "memory_gb"}),
	}
}

// setNodeCount resizes a group out of band, as `kubectl scale nodegroup/<name>` would.
func setNodeCount(s *harness.Scenario, name string, n int32) {
	s.T.Helper()
	harness.Update(s, &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}}, func(g *ngv1.NodeGroup) { g.Spec.NodeCount = n })
}

// The organisation's quota holds the control plane (2 × S: 16 vCPU / 24 GB) and one 2XS
// (4 / 4), and the controller is told so: whether it sends a launch then rests on what it
// counts. A managed group running its one 2XS is resized by hand to two nodes; the quota
// engine refuses the resize (the group shows QuotaExceeded) and keeps holding the node that
// runs. So does the controller: it counts the group's running node, and a pod that needs
// another node waits, with no NodeGroup created and none refused. Had it stopped counting the
// refused group, it would see room for a 2XS and send one to be refused. The resize is
// reverted at the end.
func TestRefusedResizeKeepsChargingTheRunningNode(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*headroom`, `could not schedule pod`)
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		harness.PlatformQuirks(o)
		o.QuotaCPU, o.QuotaRAMGB = 20, 28
	})
	s.FreshController(map[string]string{"CLEVER_CLOUD_QUOTA_CPU": "20", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "28"})
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS"}, time.Minute, harness.OnDemand)
	groups := s.RecordGroups(pool.Name, nil)
	d := s.Deployment("running", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	name := s.PoolGroups(pool.Name)[0].Name
	group := func() *ngv1.NodeGroup {
		got := &ngv1.NodeGroup{}
		Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: name}, got)).To(Succeed())
		return got
	}
	Eventually(func() string { return group().Status.Phase }).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Equal(ngv1.PhaseSynced))
	full := [2]float64{20, 28}
	Eventually(func() [2]float64 { return usage(s) }).WithTimeout(10 * time.Second).WithPolling(500 * time.Millisecond).Should(Equal(full))

	setNodeCount(s, name, 2)
	Eventually(func(g Gomega) {
		got := group()
		g.Expect(got.Status.Phase).To(Equal(ngv1.PhaseQuotaExceeded))
		failed := meta.FindStatusCondition(got.Status.Conditions, ngv1.ConditionReconcileFailed)
		g.Expect(failed).NotTo(BeNil())
		g.Expect(failed.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(failed.Reason).To(Equal(ngv1.ReasonQuotaExceeded))
		g.Expect(got.Status.NodeCount).To(BeEquivalentTo(1), "nodes running")
	}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	Eventually(func() []corev1.Event { return s.EventsSince(garbagecollection.ReasonResized, name) }).
		WithTimeout(time.Minute).WithPolling(time.Second).ShouldNot(BeEmpty())

	// Another pod that needs a node of its own: the quota is full, so nothing is sent.
	more := s.Deployment("more", pool.Name, 1, "1", "1Gi", harness.AwayFrom(d.Spec.Selector.MatchLabels))
	Consistently(func(g Gomega) {
		g.Expect(usage(s)).To(Equal(full), "quota use the controller counts")
		g.Expect(groups.Created()).To(Equal(1), "NodeGroups created")
		g.Expect(s.QuotaRefusals()).To(BeZero(), "launches refused")
		for _, p := range s.Pods(more) {
			g.Expect(p.Spec.NodeName).To(BeEmpty())
		}
		err := env.Client.Get(s.Ctx, client.ObjectKey{Name: ngv1.NodeName(name, 1)}, &corev1.Node{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a second node of the refused resize (%v)", err)
		running, _ := s.RunningPods(d)
		g.Expect(running).To(Equal(1), "the pod on the resized group")
	}).WithTimeout(45 * time.Second).WithPolling(time.Second).Should(Succeed())

	// Reverted, the group is whole again and still counted once.
	setNodeCount(s, name, 1)
	Eventually(func(g Gomega) {
		got := group()
		g.Expect(got.Status.Phase).To(Equal(ngv1.PhaseSynced))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, ngv1.ConditionReconcileFailed)).To(BeFalse())
		g.Expect(usage(s)).To(Equal(full))
	}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	Expect(groups.Created()).To(Equal(1), "NodeGroups created")
	Expect(s.QuotaRefusals()).To(BeZero(), "launches refused")
}
