package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// With CKE's default quota (40 vCPU / 40 GB, two S control-plane nodes using 16 / 24)
// and no quota configured, a pod only an XL fits costs one refused NodeGroup — the probe that
// teaches the limit — and never blocks a small pod that fits: the 2XS launches and runs while
// the XL pod stays Pending.
func TestRefusedXLDoesNotBlockAFitting2XS(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor)`,
		`could not schedule pod`)
	// Learned limits and refusal memory live in the controller's memory: start from a fresh
	// controller that knows no quota, and leave a fresh one to the next scenario.
	s.T.Cleanup(func() { s.RestartController(nil) })
	s.RestartController(nil)
	before := refusals(s)

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	big := s.Deployment("xl", pool.Name, 1, "13", "1Gi") // 13 vCPU: only an XL fits
	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(cloudprovider.ReasonQuotaExceeded, "")).NotTo(BeEmpty())
	}).WithTimeout(launchTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())

	small := s.Deployment("small", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(small, 1, launchTimeout)
	Expect(flavorsOf(s, pool.Name)).To(ContainElement("2XS"))

	// The XL pod stays Pending, and no second XL is ever sent to the quota engine.
	Consistently(func(g Gomega) {
		for _, p := range s.Pods(big) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Spec.NodeName).To(BeEmpty())
		}
		g.Expect(flavorsOf(s, pool.Name)).NotTo(ContainElement("XL"))
	}).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(Succeed())
	Expect(refusals(s)-before).To(Equal(1.0), "refused NodeGroups: only the probe that taught the limit")
	Expect(s.Metric("karpenter_clevercloud_quota_limit", map[string]string{"resource": "memory_gb"})).To(Equal(40.0))
}

// With the quota configured, a pod that does not fit the headroom waits without a
// single NodeGroup being refused, and capacity freed by another pool is used within seconds.
func TestFreedQuotaIsUsedWithinSeconds(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`could not schedule pod`, `failed launching nodeclaim.*headroom`)
	s.T.Cleanup(func() { s.RestartController(nil) })
	s.RestartController(map[string]string{"CLEVER_CLOUD_QUOTA_CPU": "40", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "40"})

	class := s.NodeClass("", nil)
	// 16 vCPU / 24 GB of 40 / 40 are the control plane's: an M (10 / 16) takes every GB left.
	holder := s.NodePool("-holder", class, []string{"M"}, 5*time.Second, harness.OnDemand)
	waiter := s.NodePool("-waiter", class, []string{"2XS"}, time.Minute, harness.OnDemand)
	a := s.Deployment("holder", holder.Name, 1, "9", "10Gi")
	s.WaitRunning(a, 1, launchTimeout)
	b := s.Deployment("waiter", waiter.Name, 1, "1", "1Gi")
	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(cloudprovider.ReasonQuotaLimited, "")).NotTo(BeEmpty())
	}).WithTimeout(launchTimeout).WithPolling(time.Second).Should(Succeed())
	Consistently(func(g Gomega) {
		g.Expect(flavorsOf(s, waiter.Name)).To(BeEmpty())
	}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())

	// The holder's pod goes; its M is consolidated away; the waiter launches a 2XS soon after.
	s.Scale(a, 0)
	var freed time.Time
	Eventually(func() []string { return flavorsOf(s, holder.Name) }).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(BeEmpty())
	Eventually(func() bool {
		groups, err := s.Env.PoolNodeGroups(s.Ctx, holder.Name)
		Expect(err).NotTo(HaveOccurred())
		return len(groups) == 0
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(BeTrue())
	freed = time.Now()
	Eventually(func() []string { return flavorsOf(s, waiter.Name) }).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(ConsistOf("2XS"))
	t.Logf("quota freed → waiting pool's NodeGroup created: %s", time.Since(freed).Round(100*time.Millisecond))
	Expect(time.Since(freed)).To(BeNumerically("<", 30*time.Second))
	s.WaitRunning(b, 1, launchTimeout)
	Expect(refusals(s)).To(Equal(0.0), "a known quota is never probed")
}

// As shipped, on a raised quota: the organisation has 80 / 80 and the controller knows
// nothing. Twelve one-per-node 2XS pods need 48 / 48 beyond the control plane's 16 / 24, more
// than CKE's default leaves: the launches beyond it go as probes, one more per accepted probe,
// and every pod runs without a single refused NodeGroup.
func TestRaisedQuotaIsClimbedWithoutRefusals(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Karpenter retries the launches the tracker holds back (beyond the probe window).
	s.AllowErrors(`failed launching nodeclaim.*headroom`, `could not schedule pod`)
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.QuotaCPU, o.QuotaRAMGB = 80, 80 })
	s.T.Cleanup(func() { s.RestartController(nil) })
	s.RestartController(nil) // knows no quota

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS"}, time.Minute, harness.OnDemand)
	d := s.Deployment("climb", pool.Name, 12, "1", "1Gi", harness.OnePerNode)
	start := time.Now()
	s.WaitRunning(d, 12, 3*launchTimeout)
	t.Logf("12 2XS beyond CKE's default quota, quota unknown: all Running %s after the pods were created", time.Since(start).Round(100*time.Millisecond))
	Expect(refusals(s)).To(Equal(0.0), "no NodeGroup refused: the quota was never exceeded")
	Expect(flavorsOf(s, pool.Name)).To(HaveLen(12))
	// Eight 2XS went beyond the default as probes; each accepted one widened the window.
	window := s.Metric("karpenter_clevercloud_quota_probe_window", nil)
	t.Logf("probe window after the climb: %.0f", window)
	Expect(window).To(BeNumerically(">=", 2), "probes were let fly more than one at a time")
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
	s.T.Cleanup(func() { s.RestartController(nil) })
	s.RestartController(quotaEnv)
	before := refusals(s)

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	d := s.Deployment("episode", pool.Name, 12, "1", "1Gi")
	start := time.Now()
	s.WaitRunning(d, 12, 3*launchTimeout)
	t.Logf("12 pods in the default quota's headroom: all Running %s after the pods were created, on %v",
		time.Since(start).Round(100*time.Millisecond), flavorsOf(s, pool.Name))
	Expect(refusals(s)-before).To(BeNumerically("<=", maxRefusals), "refused NodeGroups")
	Expect(flavorsOf(s, pool.Name)).NotTo(ContainElement("M"), "an M strands the vCPU headroom")
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
