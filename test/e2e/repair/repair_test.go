package repair

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

const (
	// repairMargin is how long past the toleration a repair may take to start, and so how long
	// past it the scenarios that expect none keep watching: core's disruption loop notices an
	// eligible node within its 10 s poll and validates the replacement before deleting.
	repairMargin = time.Minute
)

// repairController restarts the controller from the short-toleration build, NodeRepair set
// as given and the bundle's other gates kept; the suite's controller comes back at the end.
func repairController(s *harness.Scenario, nodeRepair bool) {
	s.T.Helper()
	gates, err := env.FeatureGates(map[string]bool{"NodeRepair": nodeRepair})
	Expect(err).NotTo(HaveOccurred())
	s.RestartRepairController(map[string]string{"FEATURE_GATES": gates})
}

// reportNotReady makes a node's kubelet report NotReady and returns since when, as the node
// says (what core measures the toleration from).
func reportNotReady(s *harness.Scenario, name string) time.Time {
	s.T.Helper()
	since, err := env.ReportNotReady(s.Ctx, name)
	Expect(err).NotTo(HaveOccurred())
	s.T.Logf("node %s NotReady since %s", name, since.Format(time.TimeOnly))
	return since
}

// claimIntact fails unless the NodeClaim still exists with the same UID and is not being
// deleted, and its NodeGroup and Node are still there.
func claimIntact(g Gomega, s *harness.Scenario, claim karpv1.NodeClaim) {
	nc := &karpv1.NodeClaim{}
	g.Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(&claim), nc)).To(Succeed(), "NodeClaim %s", claim.Name)
	g.Expect(nc.UID).To(Equal(claim.UID), "NodeClaim %s recreated", claim.Name)
	g.Expect(nc.DeletionTimestamp).To(BeNil(), "NodeClaim %s is being deleted", claim.Name)
	ng := &ngv1.NodeGroup{}
	g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: claim.Name}, ng)).To(Succeed(), "NodeGroup %s", claim.Name)
	g.Expect(ng.DeletionTimestamp).To(BeNil(), "NodeGroup %s is being deleted", claim.Name)
	g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: claim.Status.NodeName}, &corev1.Node{})).To(Succeed(), "Node %s", claim.Status.NodeName)
}

// claimGone fails until the NodeClaim, its NodeGroup (the billed VM) and its Node are gone.
func claimGone(g Gomega, s *harness.Scenario, claim karpv1.NodeClaim) {
	for _, obj := range []client.Object{&karpv1.NodeClaim{}, &ngv1.NodeGroup{}} {
		err := env.Client.Get(s.Ctx, client.ObjectKey{Name: claim.Name}, obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s still there (%v)", obj, claim.Name, err)
	}
	err := env.Client.Get(s.Ctx, client.ObjectKey{Name: claim.Status.NodeName}, &corev1.Node{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Node %s still there (%v)", claim.Status.NodeName, err)
}

// runningOn fails unless the Deployment's live pods are n, all Running and Ready, each on one
// of nodes.
func runningOn(g Gomega, s *harness.Scenario, pods []corev1.Pod, n int, nodes ...string) {
	var live []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	g.Expect(live).To(HaveLen(n), "live pods")
	for _, p := range live {
		g.Expect(p.Status.Phase == corev1.PodRunning && harness.PodReady(&p)).To(BeTrue(), "pod %s: phase %s", p.Name, p.Status.Phase)
		g.Expect(p.Spec.NodeName).To(BeElementOf(nodes), "pod %s", p.Name)
	}
}

func repairs(s *harness.Scenario, pool string) float64 {
	return s.Metric("karpenter_nodeclaims_disrupted_total", map[string]string{"reason": "unhealthy", "nodepool": pool})
}

// NodeRepair on: a node whose kubelet reports it NotReady (KubeletNotReady, a broken runtime)
// is replaced once the toleration has passed: the replacement NodeClaim is launched first (never
// before the toleration), the pods move to its node, and the old claim, NodeGroup and Node go.
func TestNodeRepairReplacesANotReadyNode(t *testing.T) {
	s := harness.NewScenario(t, env)
	repairController(s, true)
	class := s.NodeClass("", nil)
	// No consolidation in the window: only repair may touch the node.
	pool := s.NodePool("", class, nil, time.Hour, harness.OnDemand)
	d := s.Deployment("patient", pool.Name, 2, "250m", "256Mi")
	pods := s.WaitRunning(d, 2, harness.LaunchTimeout)
	old := s.WaitInitializedClaims(pool.Name, 1)[0]
	Expect(pods[0].Spec.NodeName).To(Equal(old.Status.NodeName))
	Expect(pods[1].Spec.NodeName).To(Equal(old.Status.NodeName))

	since := reportNotReady(s, old.Status.NodeName)
	eligible := since.Add(stack.RepairToleration)

	var fresh karpv1.NodeClaim
	Eventually(func(g Gomega) {
		claims, err := env.NodeClaims(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		var others []karpv1.NodeClaim
		for _, c := range claims {
			if c.UID != old.UID {
				others = append(others, c)
			}
		}
		g.Expect(others).To(HaveLen(1), "replacement NodeClaims")
		fresh = others[0]
	}).WithTimeout(time.Until(eligible)+repairMargin).WithPolling(time.Second).Should(Succeed(),
		"no replacement within %s of the toleration's end (was the repair toleration linked in?)", repairMargin)
	// Timestamps are whole seconds, and so is the end of the toleration measured from one.
	Expect(fresh.CreationTimestamp.Time).NotTo(BeTemporally("<", eligible), "replacement launched before the toleration ended")
	s.T.Logf("replacement %s launched %s after the toleration ended", fresh.Name, fresh.CreationTimestamp.Sub(eligible))

	Eventually(func(g Gomega) {
		claimGone(g, s, old)
		nc := &karpv1.NodeClaim{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(&fresh), nc)).To(Succeed())
		g.Expect(nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue()).To(BeTrue(), "replacement initialized")
		fresh = *nc
		runningOn(g, s, s.Pods(d), 2, fresh.Status.NodeName)
		groups, err := env.PoolNodeGroups(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(groups).To(HaveLen(1), "NodeGroups of the pool")
		g.Expect(groups[0].Name).To(Equal(fresh.Name))
	}).WithTimeout(harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	s.T.Logf("old claim, group and node gone, pods Running on %s, %s after the toleration ended", fresh.Status.NodeName, time.Since(eligible).Round(time.Second))
	Expect(repairs(s, pool.Name)).To(Equal(1.0), "the replacement was core's repair")
}

// NodeRepair off (the bundle's default): the same unhealthy node, with the same short
// toleration linked in, keeps its claim, group and node well past the toleration.
func TestNodeRepairOffLeavesAnUnhealthyNode(t *testing.T) {
	s := harness.NewScenario(t, env)
	repairController(s, false)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Hour, harness.OnDemand)
	d := s.Deployment("patient", pool.Name, 1, "250m", "256Mi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	old := s.WaitInitializedClaims(pool.Name, 1)[0]

	since := reportNotReady(s, old.Status.NodeName)
	Consistently(func(g Gomega) {
		claimIntact(g, s, old)
		claims, err := env.NodeClaims(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(claims).To(HaveLen(1), "NodeClaims of the pool")
	}).WithTimeout(time.Until(since.Add(stack.RepairToleration + repairMargin))).WithPolling(time.Second).Should(Succeed())
	Expect(repairs(s, pool.Name)).To(BeZero())
}

// Core withholds repair from a NodePool with more than 20% of its nodes unhealthy (rounded
// up, so one node of two may be repaired, two may not): a correlated failure is not fixed by
// replacing nodes. Both nodes of a two-node pool turn NotReady: nothing is replaced past the
// toleration, and core says why (NodeRepairBlocked). One node recovers: the other is then
// repaired.
func TestNodeRepairHoldsBeyondTheUnhealthyBudget(t *testing.T) {
	s := harness.NewScenario(t, env)
	repairController(s, true)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Hour, harness.OnDemand)
	d := s.Deployment("spread", pool.Name, 2, "250m", "256Mi", harness.OnePerNode)
	s.WaitRunning(d, 2, harness.LaunchTimeout)
	claims := s.WaitInitializedClaims(pool.Name, 2)

	var last time.Time
	for _, c := range claims {
		last = reportNotReady(s, c.Status.NodeName)
	}
	Consistently(func(g Gomega) {
		for _, c := range claims {
			claimIntact(g, s, c)
		}
		claims, err := env.NodeClaims(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(claims).To(HaveLen(2), "NodeClaims of the pool")
	}).WithTimeout(time.Until(last.Add(stack.RepairToleration + repairMargin))).WithPolling(time.Second).Should(Succeed())
	blocked := s.EventsSince("NodeRepairBlocked", "")
	Expect(blocked).NotTo(BeEmpty(), "core says why it withholds the repair")
	Expect(blocked[0].Message).To(ContainSubstring(`more than 20% of nodes in nodepool "` + pool.Name + `" are unhealthy`))
	Expect(repairs(s, pool.Name)).To(BeZero())

	healed, sick := claims[0], claims[1]
	Expect(env.ReportReady(s.Ctx, healed.Status.NodeName)).To(Succeed())
	recovered := time.Now()
	Eventually(func(g Gomega) {
		claimGone(g, s, sick)
		claimIntact(g, s, healed)
		claims, err := env.NodeClaims(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(claims).To(HaveLen(2), "NodeClaims of the pool")
		var fresh karpv1.NodeClaim
		for _, c := range claims {
			if c.UID != healed.UID {
				fresh = c
			}
		}
		g.Expect(fresh.UID).NotTo(Equal(types.UID("")))
		g.Expect(fresh.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue()).To(BeTrue(), "replacement initialized")
		// The moved pod runs Ready on the replacement. The healed node's pod stays where it was;
		// the simulator's kubelet does not re-report the readiness the controller-manager took
		// from it while the node was NotReady, so only its phase is asserted.
		var moved, stayed []corev1.Pod
		for _, p := range s.Pods(d) {
			switch {
			case p.DeletionTimestamp != nil:
			case p.Spec.NodeName == healed.Status.NodeName:
				stayed = append(stayed, p)
			default:
				moved = append(moved, p)
			}
		}
		runningOn(g, s, moved, 1, fresh.Status.NodeName)
		g.Expect(stayed).To(HaveLen(1), "pods on the healed node")
		g.Expect(stayed[0].Status.Phase).To(Equal(corev1.PodRunning))
		groups, err := env.PoolNodeGroups(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(groups).To(HaveLen(2), "NodeGroups of the pool")
	}).WithTimeout(time.Minute + repairMargin + harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	s.T.Logf("%s replaced %s after %s recovered", sick.Name, time.Since(recovered).Round(time.Second), healed.Status.NodeName)
	Expect(repairs(s, pool.Name)).To(Equal(1.0))
}

// NodeRepair on: a node whose kubelet stops reporting at all (a dead VM, a partition) turns
// Ready=Unknown once the controller-manager's grace period passes, and is replaced once the
// toleration has passed from then, like a NotReady one: the pods end up on the replacement and
// the silent node's claim, NodeGroup and Node go.
func TestNodeRepairReplacesASilentNode(t *testing.T) {
	s := harness.NewScenario(t, env)
	repairController(s, true)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Hour, harness.OnDemand)
	d := s.Deployment("patient", pool.Name, 1, "250m", "256Mi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	old := s.WaitInitializedClaims(pool.Name, 1)[0]

	Expect(env.Cluster.StopKubelet(s.Ctx, old.Status.NodeName)).To(Succeed())
	var since time.Time
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: old.Status.NodeName}, n)).To(Succeed())
		var ready *corev1.NodeCondition
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				ready = &n.Status.Conditions[i]
			}
		}
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(corev1.ConditionUnknown), "Ready")
		since = ready.LastTransitionTime.Time
	}).WithTimeout(sim.NodeMonitorGracePeriod+sim.NodeMonitorPeriod+30*time.Second).WithPolling(time.Second).Should(Succeed(),
		"the controller-manager did not mark the silent node Unknown")
	eligible := since.Add(stack.RepairToleration)
	s.T.Logf("node %s Unknown since %s", old.Status.NodeName, since.Format(time.TimeOnly))

	Eventually(func(g Gomega) {
		claimGone(g, s, old)
		claims, err := env.NodeClaims(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(claims).To(HaveLen(1), "NodeClaims of the pool")
		g.Expect(claims[0].UID).NotTo(Equal(old.UID))
		g.Expect(claims[0].CreationTimestamp.Time).NotTo(BeTemporally("<", eligible), "replacement launched before the toleration ended")
		g.Expect(claims[0].Status.NodeName).NotTo(BeEmpty())
		runningOn(g, s, s.Pods(d), 1, claims[0].Status.NodeName)
	}).WithTimeout(time.Until(eligible) + repairMargin + harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	s.T.Logf("silent node replaced, pod Running, %s after the toleration ended", time.Since(eligible).Round(time.Second))
	Expect(repairs(s, pool.Name)).To(Equal(1.0), "the replacement was core's repair")
}
