package quota

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	ctrlquota "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// With CKE's default quota (40 vCPU / 40 GB, two S control-plane nodes using 16 / 24), no
// quota configured and the quota engine's quirks on, a pod only an XL fits costs one refused
// NodeGroup — the probe that finds the XL does not fit — and does not keep a small pod that
// fits from running. The engine keeps the refused XL's reservation for minutes, which the
// controller charges as a suspected leak: the 2XS waits for that to expire
// (ctrlquota.LeakLifetime), then launches without another refusal and runs, while the XL pod
// stays Pending.
func TestRefusedXLDoesNotBlockAFitting2XS(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor)`,
		`could not schedule pod`)
	env.Cluster.Operator().Configure(platformQuirks)
	freshController(s, nil)
	before := refusals(s)

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	groups := watchGroups(s, pool.Name, nil)
	big := s.Deployment("xl", pool.Name, 1, "13", "1Gi") // 13 vCPU: only an XL fits
	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(cloudprovider.ReasonQuotaExceeded, "")).NotTo(BeEmpty())
	}).WithTimeout(harness.LaunchTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	refused := time.Now()

	small := s.Deployment("small", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(small, 1, ctrlquota.LeakLifetime+harness.LaunchTimeout)
	t.Logf("the fitting 2XS ran %s after the XL was refused (suspected leak: %s)", time.Since(refused).Round(time.Second), ctrlquota.LeakLifetime)
	Expect(s.PoolFlavors(pool.Name)).To(ContainElement("2XS"))

	// The XL pod stays Pending, and no second XL is ever sent to the quota engine.
	Consistently(func(g Gomega) {
		for _, p := range s.Pods(big) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Spec.NodeName).To(BeEmpty())
		}
		g.Expect(s.PoolFlavors(pool.Name)).NotTo(ContainElement("XL"))
	}).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(Succeed())
	Expect(refusals(s)-before).To(Equal(1.0), "refused NodeGroups: only the probe that found the XL does not fit")
	Expect(flavorsOf(groups.refused())).To(Equal([]string{"XL"}), "refused creations, as the platform wrote them")
	// The refusal rules out the XL's use and beyond; it pins no limit (neither resource was
	// proven to fit there), so a quota raised later is not hidden behind it.
	Expect(s.Metric("karpenter_clevercloud_quota_refusals_remembered", nil)).To(Equal(1.0))
	Expect(s.Metric("karpenter_clevercloud_quota_limit", map[string]string{"resource": "memory_gb"})).To(Equal(0.0))
}

// With the quota configured, a pod that does not fit the headroom waits without a
// single NodeGroup being refused, and capacity freed by another pool is used within seconds.
func TestFreedQuotaIsUsedWithinSeconds(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`could not schedule pod`, `failed launching nodeclaim.*headroom`)
	freshController(s, map[string]string{"CLEVER_CLOUD_QUOTA_CPU": "40", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "40"})

	class := s.NodeClass("", nil)
	// 16 vCPU / 24 GB of 40 / 40 are the control plane's: an M (10 / 16) takes every GB left.
	holder := s.NodePool("-holder", class, []string{"M"}, 5*time.Second, harness.OnDemand)
	waiter := s.NodePool("-waiter", class, []string{"2XS"}, time.Minute, harness.OnDemand)
	a := s.Deployment("holder", holder.Name, 1, "9", "10Gi")
	s.WaitRunning(a, 1, harness.LaunchTimeout)
	b := s.Deployment("waiter", waiter.Name, 1, "1", "1Gi")
	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(cloudprovider.ReasonQuotaLimited, "")).NotTo(BeEmpty())
	}).WithTimeout(harness.LaunchTimeout).WithPolling(time.Second).Should(Succeed())
	Consistently(func(g Gomega) {
		g.Expect(s.PoolFlavors(waiter.Name)).To(BeEmpty())
	}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())

	// The holder's pod goes; its M is consolidated away; the waiter launches a 2XS soon after.
	s.Scale(a, 0)
	var freed time.Time
	Eventually(func() []string { return s.PoolFlavors(holder.Name) }).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(BeEmpty())
	Eventually(func() bool {
		groups, err := s.Env.PoolNodeGroups(s.Ctx, holder.Name)
		Expect(err).NotTo(HaveOccurred())
		return len(groups) == 0
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(BeTrue())
	freed = time.Now()
	Eventually(func() []string { return s.PoolFlavors(waiter.Name) }).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(ConsistOf("2XS"))
	t.Logf("quota freed → waiting pool's NodeGroup created: %s", time.Since(freed).Round(100*time.Millisecond))
	Expect(time.Since(freed)).To(BeNumerically("<", 30*time.Second))
	s.WaitRunning(b, 1, harness.LaunchTimeout)
	Expect(refusals(s)).To(Equal(0.0), "a known quota is never probed")
}

// As shipped, on a raised quota: the organisation has 80 / 80 and the controller knows
// nothing. Twelve one-per-node 2XS pods need 48 / 48 beyond the control plane's 16 / 24, more
// than CKE's default leaves: the four the default holds launch together, the eight beyond it
// go as probes, one at a time (none beside another launch), and every pod runs without a
// single refused NodeGroup.
func TestRaisedQuotaIsClimbedWithoutRefusals(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Karpenter retries the launches the tracker holds back: beyond the sure limit while a
	// probe is in flight, for longer than the acceptance timeout.
	s.AllowErrors(`failed launching nodeclaim.*(headroom|quota probe was still awaiting its verdict)`, `could not schedule pod`)
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.QuotaCPU, o.QuotaRAMGB = 80, 80 })
	freshController(s, nil) // knows no quota

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS"}, time.Minute, harness.OnDemand)
	// Four 2XS (16 / 16) fit beside the control plane in CKE's default: every later one is a
	// probe.
	groups := watchGroups(s, pool.Name, func(r groupRecord) bool { return r.index > 4 })
	// The gauge is sampled, so a second probe in flight for less than a sample could be
	// missed: the watch above is the exact check, this one what an operator would see.
	ctx, stop := context.WithCancel(s.Ctx)
	defer stop()
	inFlight := make(chan float64, 1)
	go func() {
		most := 0.0
		defer func() { inFlight <- most }()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, err := env.Controller().Metric("karpenter_clevercloud_quota_probes_in_flight", nil); err == nil {
				most = max(most, v)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()

	d := s.Deployment("climb", pool.Name, 12, "1", "1Gi", harness.OnePerNode)
	start := time.Now()
	s.WaitRunning(d, 12, 3*harness.LaunchTimeout)
	stop()
	t.Logf("12 2XS beyond CKE's default quota, quota unknown: all Running %s after the pods were created", time.Since(start).Round(100*time.Millisecond))
	Expect(refusals(s)).To(Equal(0.0), "no NodeGroup refused: the quota was never exceeded")
	Expect(groups.refused()).To(BeEmpty(), "refused creations, as the platform wrote them")
	Expect(s.PoolFlavors(pool.Name)).To(HaveLen(12))
	Expect(groups.created()).To(Equal(12), "NodeGroups created: none refused, none deleted")
	Expect(groups.probesFlewAlone()).To(BeEmpty(), "probes beside other launches")
	most := <-inFlight
	t.Logf("probes in flight during the climb, sampled every 100 ms: at most %.0f", most)
	Expect(most).To(BeNumerically("<=", 1), "probes in flight")
	// Each accepted probe proved a little more: the proof covers all twelve beside the
	// control plane.
	Expect(s.Metric("karpenter_clevercloud_quota_limit_proven", map[string]string{"resource": "memory_gb"})).To(BeNumerically(">=", 24+48))
	Expect(s.Metric("karpenter_clevercloud_quota_probes_in_flight", nil)).To(BeZero())
}

// Twelve 1 CPU / 1Gi pods (no spreading) against CKE's default quota, the two S
// control-plane nodes using 16 vCPU / 24 GB of 40 / 40. Left to itself Karpenter packs ten of
// them onto an M that takes every GB left and strands 14 vCPU; the offerings steer it to the
// flavors that make the most of the headroom (2XS, three pods each, or XS, six), so every pod
// runs. Known quota: not one NodeGroup refused. Unknown quota: none either — CKE's default is
// the provisional limit and its headroom holds all twelve, so nothing is probed beyond it
// (one refusal would be acceptable: what such a probe costs).
func TestQuotaConfiguredHeadroomHoldsEveryPod(t *testing.T) {
	headroomEpisode(t, map[string]string{"CLEVER_CLOUD_QUOTA_CPU": "40", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "40"}, 0)
}

func TestQuotaInferredHeadroomHoldsEveryPod(t *testing.T) {
	headroomEpisode(t, nil, 0)
}

func headroomEpisode(t *testing.T, quotaEnv map[string]string, maxRefusals float64) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor)`, `could not schedule pod`)
	freshController(s, quotaEnv)
	before := refusals(s)

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	d := s.Deployment("episode", pool.Name, 12, "1", "1Gi")
	start := time.Now()
	s.WaitRunning(d, 12, 3*harness.LaunchTimeout)
	t.Logf("12 pods in the default quota's headroom: all Running %s after the pods were created, on %v",
		time.Since(start).Round(100*time.Millisecond), s.PoolFlavors(pool.Name))
	Expect(refusals(s)-before).To(BeNumerically("<=", maxRefusals), "refused NodeGroups")
	Expect(s.PoolFlavors(pool.Name)).NotTo(ContainElement("M"), "an M strands the vCPU headroom")
	if quotaEnv != nil {
		return
	}
	// Quota not configured: CKE's default is the provisional limit and its headroom holds all
	// twelve, so nothing was probed beyond it and nothing had to be learned (a refused probe's
	// reservation may leak upstream for minutes). The launches proved at
	// least the control plane's 24 GB.
	Expect(s.Metric("karpenter_clevercloud_quota_limit", map[string]string{"resource": "memory_gb"})).To(Equal(0.0))
	Expect(s.Metric("karpenter_clevercloud_quota_limit_proven", map[string]string{"resource": "memory_gb"})).To(BeNumerically(">=", 24))
}
