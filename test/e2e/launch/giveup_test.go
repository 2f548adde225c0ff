package launch

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/launch"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Dead launches are replaced within 5 minutes of their creation, with the shipped give-up
// times, whatever their group shows: Creating forever with no node, an UpstreamError the
// operator retries for an hour, or the operator stopped on a reason nobody knows. Each is
// given up (event, metric), its group deleted, and its pod runs on the replacement, whose node
// joins in the platform's typical 28 s, within 5 minutes of the dead launch's creation; core's
// 15-minute registration timeout never comes into it. The three die side by side on a quota
// raised, and configured, for them and their replacements: what a give-up costs in quota is
// the quota packages' business.
func TestDeadLaunchesAreReplacedWithinFiveMinutes(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Each give-up deletes a group before it was built, which the controller charges as a
	// suspected quota leak and saves: a fresh controller on each side keeps those leaks from
	// the scenarios after this one.
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.QuotaCPU, o.QuotaRAMGB = 200, 200 })
	s.FreshController(map[string]string{"CLEVER_CLOUD_QUOTA_CPU": "200", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "200"})
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		// The platform's typical times (cke-platform.md §6), which the replacements meet.
		o.JoinDelay = 28 * time.Second
		o.SyncDelayMin, o.SyncDelayMax = 38*time.Second, 58*time.Second
		o.UpstreamErrorDuration = time.Hour
	})
	class := s.NodeClass("", nil)
	type deadLaunch struct {
		name         string
		fault        operator.Fault
		rule, reason string
		pool         *karpv1.NodePool
		d            *appsv1.Deployment
		group        ngv1.NodeGroup
		running      time.Duration // from the dead group's creation to its pod Running on the replacement
	}
	launches := []*deadLaunch{
		{name: "creating", fault: operator.FaultNeverSyncNoNode, rule: "no_node", reason: "Launched"},
		{name: "upstream", fault: operator.FaultUpstreamError, rule: "no_node", reason: ngv1.ReasonUpstreamError},
		{name: "stopped", fault: operator.FaultDeadLaunch, rule: "operator_stopped", reason: operator.ReasonNetworkUnavailable},
	}
	for _, l := range launches {
		// The operator lays out a group's timeline at its decision: the fault holds for that
		// group whatever the options say afterwards.
		env.Cluster.Operator().Configure(func(o *operator.Options) { o.Faults = []operator.Fault{l.fault} })
		l.pool = s.NodePool("-"+l.name, class, nil, time.Minute)
		l.d = s.Deployment("dead-"+l.name, l.pool.Name, 1, "1", "1Gi")
		Eventually(func(g Gomega) {
			groups := s.PoolGroups(l.pool.Name)
			g.Expect(groups).To(HaveLen(1))
			l.group = groups[0]
			g.Expect(l.group.Status.Phase).NotTo(BeEmpty(), "the operator's decision")
		}).WithTimeout(harness.LaunchTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	}
	// Every replacement works: the platform recovers.
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.Faults = nil })

	// Waited for longer than the bound, so that a miss is measured, not only failed.
	Eventually(func(g Gomega) {
		for _, l := range launches {
			if l.running > 0 {
				continue
			}
			if n, _ := s.RunningPods(l.d); n == 1 {
				l.running = time.Since(l.group.CreationTimestamp.Time)
			}
			g.Expect(l.running).NotTo(BeZero(), "the pod of the %s launch Running", l.name)
		}
	}).WithTimeout(10 * time.Minute).WithPolling(time.Second).Should(Succeed())

	for _, l := range launches {
		t.Logf("%s: the dead launch's pod Running on its replacement %s after the dead launch's creation", l.name, l.running.Round(time.Second))
	}
	for _, l := range launches {
		Expect(l.running).To(BeNumerically("<", 5*time.Minute), "%s: the pod runs on a replacement within 5 minutes of the dead launch's creation", l.name)
		_, pods := s.RunningPods(l.d)
		Expect(s.NodeOf(pods[0]).Labels).NotTo(HaveKeyWithValue(ngv1.LabelNodeGroup, l.group.Name), "%s: the pod runs on the replacement", l.name)
		Expect(s.EventsSince(launch.ReasonLaunchGivenUp, l.group.Name)).NotTo(BeEmpty(), "%s: given-up event on the claim", l.name)
		Expect(s.Metric("karpenter_clevercloud_nodegroup_launches_given_up_total", map[string]string{"rule": l.rule, "reason": l.reason})).To(
			BeNumerically(">=", 1), "%s: given up by its rule", l.name)
		Eventually(func() error {
			return env.Client.Get(s.Ctx, client.ObjectKey{Name: l.group.Name}, &ngv1.NodeGroup{})
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(MatchError(ContainSubstring("not found")), "%s: the dead group is deleted", l.name)
	}
}

// A refusal the provider cannot classify (an unknown ReconcileFailed reason as the first status
// write, never Creating) fails the launch, deletes the group and sets that flavor aside: the
// pod lands on the pool's other flavor, and the refused one stays aside when a node is deleted.
func TestAnUnclassifiedRefusalSetsTheFlavorAside(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Core logs the failed launch, and the pod it cannot place while 2XS is set aside.
	s.AllowErrors(`failed launching nodeclaim.*refused`, `could not schedule pod`)
	// No memory of the flavor or of the quota from an earlier scenario, and none of the refused
	// group's suspected leak left for the next one: the controller saves its quota memory.
	s.FreshController(nil)
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.Faults = []operator.Fault{operator.FaultUnknownRefusal} })
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS"}, time.Minute)
	d := s.Deployment("unclassified", pool.Name, 1, "1", "1Gi")

	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(cloudprovider.ReasonRefused, "")).NotTo(BeEmpty())
		g.Expect(s.PoolFlavors(pool.Name)).To(BeEmpty(), "the refused group is deleted")
	}).WithTimeout(harness.LaunchTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	refusedOnce := s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"flavor": "2XS", "outcome": "Refused"})
	Expect(refusedOnce).To(BeNumerically(">=", 1))
	// The platform works again; the pool now allows XS too: the pod lands there, since the
	// refused 2XS is set aside.
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.Faults = nil })
	harness.Update(s, pool, func(np *karpv1.NodePool) { np.Spec.Template.Spec.Requirements[0].Values = []string{"2XS", "XS"} })
	s.WaitRunning(d, 1, 2*harness.LaunchTimeout)
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("XS"), "the refused 2XS was set aside")

	// A node deletion frees capacity, which says nothing about why the platform refused the
	// flavor: the replacement stays off 2XS.
	s.Scale(d, 0)
	Eventually(func() []ngv1.NodeGroup { return s.PoolGroups(pool.Name) }).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(BeEmpty())
	s.Scale(d, 1)
	s.WaitRunning(d, 1, 2*harness.LaunchTimeout)
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("XS"))
	Expect(s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"flavor": "2XS", "outcome": "Refused"})).To(Equal(refusedOnce), "2XS not tried again")
}
