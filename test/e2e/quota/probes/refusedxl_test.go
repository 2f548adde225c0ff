package probes

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	ctrlquota "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
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

	// The XL pod stays Pending, and no second XL is ever sent to the quota engine.
	Consistently(func(g Gomega) {
		for _, p := range s.Pods(big) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Spec.NodeName).To(BeEmpty())
		}
		g.Expect(s.PoolFlavors(pool.Name)).NotTo(ContainElement("XL"))
	}).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(Succeed())
	Expect(s.QuotaRefusals()-before).To(Equal(1.0), "refused NodeGroups: only the probe that found the XL does not fit")
	Expect(harness.FlavorsOfRecords(groups.Refused())).To(Equal([]string{"XL"}), "refused creations, as the platform wrote them")
	// The refusal rules out the XL's use and beyond; it pins no limit (neither resource was
	// proven to fit there), so a quota raised later is not hidden behind it.
	Expect(s.Metric("karpenter_clevercloud_quota_refusals_remembered", nil)).To(Equal(1.0))
	Expect(s.Metric("karpenter_clevercloud_quota_limit", map[string]string{"resource": "memory_gb"})).To(Equal(0.0))
}
