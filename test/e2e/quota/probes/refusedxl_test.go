package probes

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	ctrlquota "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// With CKE's default quota (40 vCPU / 40 GB, two S control-plane nodes using 16 / 24), no
// quota configured and the quota engine's quirks on, a pod only an XL fits costs one refused
// NodeGroup per RefusalMemory — the probe that finds the XL does not fit — and does not keep a
// small pod that fits from running. The engine keeps the refused XL's reservation for minutes, which the
// controller charges as a suspected leak: the 2XS waits for that to expire
// (ctrlquota.LeakLifetime), then launches without another refusal and runs, while the XL pod
// stays Pending.
func TestRefusedXLDoesNotBlockAFitting2XS(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor)`,
		`could not schedule pod`)
	env.Cluster.Operator().Configure(harness.PlatformQuirks)
	s.FreshController(nil)
	before := s.QuotaRefusals()

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	groups := s.RecordGroups(pool.Name, nil)
	big := s.Deployment("xl", pool.Name, 1, "13", "1Gi") // 13 vCPU: only an XL fits
	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(cloudprovider.ReasonQuotaExceeded, "")).NotTo(BeEmpty())
	}).WithTimeout(harness.LaunchTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	refused := time.Now()

	small := s.Deployment("small", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(small, 1, ctrlquota.LeakLifetime+harness.LaunchTimeout)
	t.Logf("the fitting 2XS ran %s after the XL was refused (suspected leak: %s)", time.Since(refused).Round(time.Second), ctrlquota.LeakLifetime)
	Expect(s.PoolFlavors(pool.Name)).To(ContainElement("2XS"))

	// The XL pod stays Pending. Its refused use is forgotten with its leak (RefusalMemory), so
	// a quota freed meanwhile would be found: the XL is asked again then, never sooner.
	s.ExpectProbedNoSoonerThanItsMemory(big, groups, "XL")
	refusedGroups := groups.Refused()
	Expect(s.QuotaRefusals()-before).To(Equal(float64(len(refusedGroups))), "refused NodeGroups: only the XL probes")
	// A refusal rules out the XL's use and beyond; it pins no limit (neither resource was
	// proven to fit there), so a quota raised later is not hidden behind it.
	Expect(s.Metric("karpenter_clevercloud_quota_refusals_remembered", nil)).To(BeNumerically("<=", 1.0))
	Expect(s.Metric("karpenter_clevercloud_quota_limit", map[string]string{"resource": "memory_gb"})).To(Equal(0.0))
}
