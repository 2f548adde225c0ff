package launch

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/launch"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Create returns on the operator's decision (Creating, ~1 s), not on Synced: the node joins
// and runs the pod while its group is still Creating, and the NodeClaim is launched (with its
// provider ID, so core's cluster state stays synced) seconds after the group was created.
func TestLaunchReturnsOnTheDecision(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Synced long after the join, as on the platform (28 s vs 38–58 s), stretched so that no
	// CI load can blur the order.
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		o.JoinDelay = 2 * time.Second
		o.SyncDelayMin, o.SyncDelayMax = 60*time.Second, 60*time.Second
	})
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)
	d := s.Deployment("decided", pool.Name, 1, "1", "1Gi")

	pods := s.WaitRunning(d, 1, harness.LaunchTimeout)
	groups := s.PoolGroups(pool.Name)
	Expect(groups).To(HaveLen(1))
	g := groups[0]
	Expect(g.Status.Phase).To(Equal(ngv1.PhaseCreating), "the pod runs while its group is still Creating")
	Expect(pods[0].Spec.NodeName).To(Equal(ngv1.NodeName(g.Name, 0)))

	// Core marks the claim Registered and Initialized shortly after the node lets the pod in:
	// wait for it rather than race it.
	claims := s.WaitInitializedClaims(pool.Name, 1)
	launched := claims[0].StatusConditions().Get(karpv1.ConditionTypeLaunched)
	Expect(launched.IsTrue()).To(BeTrue())
	// Timestamps have a one-second resolution; the decision comes 1 s after creation here.
	took := launched.LastTransitionTime.Sub(g.CreationTimestamp.Time)
	t.Logf("NodeGroup created → NodeClaim launched: %s", took)
	Expect(took).To(BeNumerically("<=", 5*time.Second), "Create waited for more than the decision")
	Expect(claims[0].StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue()).To(BeTrue())
	Expect(s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"flavor": "2XS", "outcome": "TimedOut"})).To(BeZero())
}

// A quota refusal published after Create returned (the decision came after the acceptance
// timeout) fails the launch at once: the launch follower deletes the NodeClaim and the group,
// instead of leaving the pod to core's 15-minute registration timeout.
func TestLateRefusalFailsTheLaunchAtOnce(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor)`, `could not schedule pod`)
	// The refusal teaches the controller a limit below CKE's default, which it saves; a fresh
	// controller, its saved quota memory forgotten, starts the next scenario without it.
	s.FreshController(map[string]string{"NODEGROUP_ACCEPTANCE_TIMEOUT": "1s"})
	// The control plane (2 × S) uses the whole quota: every group is refused, 4 s after its
	// creation, long after Create gave up waiting.
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		o.DecisionDelay = 4 * time.Second
		o.QuotaCPU, o.QuotaRAMGB = 16, 24
	})
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS"}, time.Minute)
	created := s.RecordGroups(pool.Name, nil)
	d := s.Deployment("refused-late", pool.Name, 1, "1", "1Gi")

	var first karpv1.NodeClaim
	Eventually(func(g Gomega) {
		claims, err := env.NodeClaims(s.Ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(claims).NotTo(BeEmpty())
		first = claims[0]
		g.Expect(first.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue()).To(BeTrue(), "launched on the timeout")
	}).WithTimeout(harness.LaunchTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	launchedAt := time.Now()

	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(launch.ReasonRefusedAfterLaunch, first.Name)).NotTo(BeEmpty())
		err := env.Client.Get(s.Ctx, client.ObjectKeyFromObject(&first), &karpv1.NodeClaim{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the refused NodeClaim is still there")
		err = env.Client.Get(s.Ctx, client.ObjectKey{Name: first.Name}, &ngv1.NodeGroup{})
		g.Expect(err).To(HaveOccurred(), "the refused NodeGroup is still there")
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	t.Logf("refused launch failed %s after Create returned", time.Since(launchedAt).Round(100*time.Millisecond))
	Expect(s.Metric("karpenter_clevercloud_nodegroup_late_refusals_total", map[string]string{"reason": ngv1.ReasonQuotaExceeded})).To(BeNumerically(">=", 1))
	Expect(s.Metric("karpenter_clevercloud_quota_refusals_remembered", nil)).To(BeNumerically(">=", 1), "the refusal taught the quota tracker")
	// What was learned stops the create → reject cycle: no new group in the next 15 s.
	n := created.Created()
	Consistently(created.Created).WithTimeout(15*time.Second).WithPolling(time.Second).Should(Equal(n), "NodeGroups created after the refusal was learned")
	Expect(s.Pods(d)).To(HaveLen(1))
}

// A transient failure of Clever Cloud's API (UpstreamError, retried by the operator) is
// surfaced, and nothing is deleted: the same group goes on and runs the pod.
func TestTransientUpstreamErrorIsSurfacedNotDeleted(t *testing.T) {
	s := harness.NewScenario(t, env)
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		o.Faults = []operator.Fault{operator.FaultUpstreamError}
		o.UpstreamErrorDuration = 5 * time.Second
	})
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)
	created := s.RecordGroups(pool.Name, nil)
	d := s.Deployment("flaky-upstream", pool.Name, 1, "1", "1Gi")

	s.WaitRunning(d, 1, 2*harness.LaunchTimeout)
	Expect(s.EventsSince(cloudprovider.ReasonTransientFailure, "")).NotTo(BeEmpty())
	Expect(s.Metric("karpenter_clevercloud_nodegroup_transient_failures_total", map[string]string{"reason": ngv1.ReasonUpstreamError})).To(BeNumerically(">=", 1))
	Expect(created.Created()).To(Equal(1), "one NodeGroup, never deleted and re-created")
	Expect(s.EventsSince(launch.ReasonRefusedAfterLaunch, "")).To(BeEmpty())
}

// A group that never reaches Synced (its node joined and runs pods) is reported once it is
// overdue, by a gauge and an event on its NodeClaim; nothing is deleted.
func TestGroupThatNeverSyncsIsReportedOverdue(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.RestartController(map[string]string{"NODEGROUP_SYNC_OVERDUE_AFTER": "15s"})
	t.Cleanup(func() { s.RestartController(nil) })
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.Faults = []operator.Fault{operator.FaultNeverSync} })
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)
	d := s.Deployment("never-synced", pool.Name, 1, "1", "1Gi")

	s.WaitRunning(d, 1, harness.LaunchTimeout)
	claims, err := env.NodeClaims(s.Ctx, pool.Name)
	Expect(err).NotTo(HaveOccurred())
	Expect(claims).To(HaveLen(1))
	claim := claims[0]
	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(launch.ReasonSyncOverdue, claim.Name)).NotTo(BeEmpty())
		g.Expect(s.Metric("karpenter_clevercloud_nodegroup_launches_overdue", nil)).To(BeEquivalentTo(1))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	got := &karpv1.NodeClaim{}
	Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(&claim), got)).To(Succeed())
	Expect(got.UID).To(Equal(claim.UID))
	Expect(got.DeletionTimestamp).To(BeNil(), "an overdue launch is reported, not deleted")
	Expect(s.PoolGroups(pool.Name)[0].Status.Phase).To(Equal(ngv1.PhaseCreating))
}

// A flavor outside the served CRD's enum (a typo or a flavor CKE does not sell, added through
// the overrides) is refused by the apiserver with a 422: it is offered as unavailable, not
// retried in a loop, and the pod lands on a flavor the platform knows.
func TestFlavorTheAPIRefusesIsOfferedAsUnavailable(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.RestartWithUnservedFlavor()

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{harness.UnservedFlavor, "2XS"}, time.Minute)
	d := s.Deployment("known-flavor", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, 2*harness.LaunchTimeout)
	Expect(harness.FlavorsOf(s.PoolGroups(pool.Name))).To(ConsistOf("2XS"))
	Expect(s.EventsSince(cloudprovider.ReasonFlavorUnsupported, "")).NotTo(BeEmpty())
	tries := s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"flavor": harness.UnservedFlavor, "outcome": "FlavorUnsupported"})
	Expect(tries).To(BeNumerically(">=", 1))
	Consistently(func() float64 {
		return s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"flavor": harness.UnservedFlavor, "outcome": "FlavorUnsupported"})
	}).WithTimeout(15*time.Second).WithPolling(time.Second).Should(Equal(tries), "the refused flavor is not retried")
}
