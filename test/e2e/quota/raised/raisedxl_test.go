package raised

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	ctrlquota "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// The organisation's quota was raised to 100 / 100 and the controller is not told. Two L
// (24 / 48) beside the control plane (16 / 24) go beyond CKE's default as probes and are
// accepted; an XL would then bring 56 / 104 and is refused. That refusal rules out the XL's
// use and beyond; it does not bring the limit down to what is proven: once its suspected leak
// has expired, smaller flavors still launch, as probes, and their pods run.
func TestRaisedQuotaStillTakesSmallerFlavorsAfterARefusedXL(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor)`, harness.ProbeWaitRetried,
		`could not schedule pod`)
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		harness.PlatformQuirks(o)
		o.QuotaCPU, o.QuotaRAMGB = 100, 100
	})
	s.FreshController(nil)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	groups := s.RecordGroups(pool.Name, nil)
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
	// The XL is asked again once its refused use is forgotten with its leak, never sooner.
	s.ExpectProbedNoSoonerThanItsMemory(big, groups, "XL")
	Expect(s.PoolFlavors(pool.Name)).To(ContainElements("L", "L", "2XS", "2XS", "2XS"))
	Expect(s.QuotaRefusals()).To(Equal(float64(len(groups.Refused()))))
}
