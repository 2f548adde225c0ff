package configured

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	ctrlquota "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// quotaEnv is the controller's settings.quota, as the bundle's environment sets it.
func quotaEnv(cpu, gb string) map[string]string {
	return map[string]string{"CLEVER_CLOUD_QUOTA_CPU": cpu, "CLEVER_CLOUD_QUOTA_MEMORY_GB": gb}
}

// The organisation's quota is 24 vCPU / 40 GB and settings.quota says so; batch judging and
// leaks are on. Six one-per-node 2XS pods: the control plane uses 16 / 24, so two 2XS fit and
// four pods wait, their flavor ruled out by the configured limit — never probed, nothing
// refused, not even once the platform quietly raises the quota to 40 / 48. Then the user
// raises settings.quota to match and the controller restarts with it (keeping its saved quota
// state, as an upgrade does): the four waiting pods get their NodeGroups at once — all
// created within quota.VerdictSlack of the new controller being ready, no refusal memory or
// suspected leak held against them — and not one NodeGroup is refused in the whole scenario.
func TestRaisedQuotaWithAConfiguredLimitIsUsedAtOnce(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Karpenter core logs every launch the configured limit rules out, and every pod it cannot
	// place while the flavor is offered as unavailable.
	s.AllowErrors(`failed launching nodeclaim.*(headroom|no available flavor)`, `could not schedule pod`)
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		harness.PlatformQuirks(o)
		o.QuotaCPU, o.QuotaRAMGB = 24, 40
	})
	s.FreshController(quotaEnv("24", "40"))

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS"}, time.Minute, harness.OnDemand)
	groups := s.RecordGroups(pool.Name, nil)
	d := s.Deployment("waiting", pool.Name, 6, "1", "1Gi", harness.OnePerNode)

	// Two run; the other four wait on the configured limit, which the NodePool event names.
	Eventually(func(g Gomega) {
		n, _ := s.RunningPods(d)
		g.Expect(n).To(Equal(2), "running pods")
		g.Expect(s.EventsSince(cloudprovider.ReasonQuotaLimited, "")).NotTo(BeEmpty(), "quota-limited events")
	}).WithTimeout(2 * harness.LaunchTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())

	// The platform's quota is raised; the configuration still says 24 / 40 and wins: no
	// launch beyond it, no probe.
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.QuotaCPU, o.QuotaRAMGB = 40, 48 })
	Consistently(func() int { return groups.Created() }).WithTimeout(10*time.Second).WithPolling(500*time.Millisecond).
		Should(Equal(2), "NodeGroups created beyond the configured limit")

	// The user raises settings.quota to the new quota: 16 / 24 of the control plane and six
	// 2XS (24 / 24) fill it exactly.
	restarting := time.Now()
	s.RestartController(quotaEnv("40", "48"))
	ready := time.Now()
	s.WaitRunning(d, 6, ctrlquota.VerdictSlack+harness.LaunchTimeout)

	all := groups.All()
	Expect(all).To(HaveLen(6), "NodeGroups created: two before the raise, four after, none refused nor deleted\n%s", groups)
	var last time.Duration
	for _, r := range all[2:] {
		Expect(r.Created).To(BeTemporally(">", restarting), "%s created before the raised configuration", r.Name)
		last = max(last, r.Created.Sub(ready))
	}
	t.Logf("settings.quota raised: the four waiting pods' NodeGroups created within %s of the new controller being ready (bound %s); all Running %s after",
		last.Round(100*time.Millisecond), ctrlquota.VerdictSlack, time.Since(ready).Round(100*time.Millisecond))
	Expect(last).To(BeNumerically("<=", ctrlquota.VerdictSlack), "the raised configuration taken at once")
	Expect(groups.Refused()).To(BeEmpty(), "refused creations, as the platform wrote them")
	Expect(s.QuotaRefusals()).To(BeZero(), "refused NodeGroups, as the controller counted them")
	Expect(s.Metric("karpenter_clevercloud_quota_refusals_within_configured_total", nil)).To(BeZero())
	Expect(s.Metric("karpenter_clevercloud_quota_refusals_remembered", nil)).To(BeZero())
}
