package quota

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	ctrlquota "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// stillPending asserts, for a while, that d's pods stay Pending and unbound and that the pool
// has no live group of flavor: nothing more is sent for them.
func stillPending(s *harness.Scenario, d *appsv1.Deployment, pool, flavor string) {
	s.T.Helper()
	Consistently(func(g Gomega) {
		for _, p := range s.Pods(d) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Spec.NodeName).To(BeEmpty())
		}
		g.Expect(s.PoolFlavors(pool)).NotTo(ContainElement(flavor))
	}).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(Succeed())
}

// CKE's default quota, nothing configured, the quota engine's quirks on (concurrent creations
// judged, and refused, together). Four one-per-node pods that fit the default (four 2XS beside
// the control plane: 32 vCPU / 40 GB) and, at the same time, one that only an XL holds, which
// the default does not. The XL goes as a probe, alone: had it been created within the same
// second as the 2XS, the engine would have refused them all. The fitting pods run, only the
// XL is refused, and it is never sent again.
func TestProbeNeverFliesBesideFittingLaunches(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor|quota probe was still awaiting its verdict)`,
		`could not schedule pod`)
	env.Cluster.Operator().Configure(platformQuirks)
	freshController(s, nil)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	groups := watchGroups(s, pool.Name, func(r groupRecord) bool { return r.flavor == "XL" })
	fitting := s.Deployment("fitting", pool.Name, 4, "1", "1Gi", harness.OnePerNode)
	// Kept off the fitting pods' nodes, so that no fitting pod rides on the XL.
	big := s.Deployment("xl", pool.Name, 1, "13", "1Gi", harness.AwayFrom(fitting.Spec.Selector.MatchLabels))

	// G1: should the XL be refused first, its suspected leak holds the 2XS back for its
	// lifetime; then one round of launches and a join.
	start := time.Now()
	s.WaitRunning(fitting, 4, ctrlquota.LeakLifetime+2*harness.LaunchTimeout)
	t.Logf("four fitting pods Running %s after the pods were created, on %v", time.Since(start).Round(time.Second), s.PoolFlavors(pool.Name))
	Eventually(func() []groupRecord { return groups.refused() }).WithTimeout(harness.LaunchTimeout).WithPolling(time.Second).ShouldNot(BeEmpty())
	stillPending(s, big, pool.Name, "XL")

	Expect(flavorsOf(groups.refused())).To(Equal([]string{"XL"}), "refused creations: the XL probe, once")
	Expect(refusals(s)).To(Equal(1.0))
	Expect(s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"flavor": "2XS", "outcome": "QuotaExceeded"})).To(BeZero(), "fitting launches refused")
	Expect(groups.probesFlewAlone()).To(BeEmpty(), "the XL beside other launches")
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("2XS", "2XS", "2XS", "2XS"))
}

// The organisation's quota was raised to 100 / 100 and the controller is not told. Two L
// (24 / 48) beside the control plane (16 / 24) go beyond CKE's default as probes and are
// accepted; an XL would then bring 56 / 104 and is refused. That refusal rules out the XL's
// use and beyond; it does not bring the limit down to what is proven: once its suspected leak
// has expired, smaller flavors still launch, as probes, and their pods run.
func TestRaisedQuotaStillTakesSmallerFlavorsAfterARefusedXL(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor|quota probe was still awaiting its verdict)`,
		`could not schedule pod`)
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		platformQuirks(o)
		o.QuotaCPU, o.QuotaRAMGB = 100, 100
	})
	freshController(s, nil)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	groups := watchGroups(s, pool.Name, nil)
	// 11.5 vCPU: only an L or an XL holds it, the L is cheaper, and the half vCPU it leaves
	// holds none of the small pods below.
	filler := s.Deployment("filler", pool.Name, 2, "11500m", "1Gi")
	s.WaitRunning(filler, 2, 2*harness.LaunchTimeout)
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("L", "L"))

	big := s.Deployment("xl", pool.Name, 1, "13", "1Gi") // 13 vCPU: only an XL holds it
	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(cloudprovider.ReasonQuotaExceeded, "")).NotTo(BeEmpty())
	}).WithTimeout(harness.LaunchTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	refused := time.Now()
	for _, r := range []string{"cpu", "memory_gb"} {
		Expect(s.Metric("karpenter_clevercloud_quota_limit", map[string]string{"resource": r})).To(BeZero(), "limit pinned in %s", r)
	}

	small := s.Deployment("small", pool.Name, 3, "1", "1Gi", harness.OnePerNode)
	s.WaitRunning(small, 3, ctrlquota.LeakLifetime+2*harness.LaunchTimeout)
	t.Logf("three 2XS Running %s after the XL was refused (suspected leak: %s)", time.Since(refused).Round(time.Second), ctrlquota.LeakLifetime)
	stillPending(s, big, pool.Name, "XL")
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("L", "L", "2XS", "2XS", "2XS"))
	Expect(flavorsOf(groups.refused())).To(Equal([]string{"XL"}), "refused creations")
	Expect(refusals(s)).To(Equal(1.0))
}
