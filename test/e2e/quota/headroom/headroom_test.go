package headroom

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// With the quota configured, a pod that does not fit the headroom waits without a
// single NodeGroup being refused, and capacity freed by another pool is used within seconds.
func TestFreedQuotaIsUsedWithinSeconds(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`could not schedule pod`, `failed launching nodeclaim.*headroom`)
	s.FreshController(map[string]string{"CLEVER_CLOUD_QUOTA_CPU": "40", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "40"})

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
	Expect(s.QuotaRefusals()).To(Equal(0.0), "a known quota is never probed")
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

// The same twelve pods with the quota unknown to the controller: CKE's default is its
// provisional limit, and its headroom holds all twelve, so at most one NodeGroup is refused
// (what a probe beyond it would cost).
func TestQuotaInferredHeadroomHoldsEveryPod(t *testing.T) {
	headroomEpisode(t, nil, 0)
}

func headroomEpisode(t *testing.T, quotaEnv map[string]string, maxRefusals float64) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor)`, `could not schedule pod`)
	s.FreshController(quotaEnv)
	before := s.QuotaRefusals()

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	d := s.Deployment("episode", pool.Name, 12, "1", "1Gi")
	start := time.Now()
	s.WaitRunning(d, 12, 3*harness.LaunchTimeout)
	t.Logf("12 pods in the default quota's headroom: all Running %s after the pods were created, on %v",
		time.Since(start).Round(100*time.Millisecond), s.PoolFlavors(pool.Name))
	Expect(s.QuotaRefusals()-before).To(BeNumerically("<=", maxRefusals), "refused NodeGroups")
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
