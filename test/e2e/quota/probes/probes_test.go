package probes

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	ctrlquota "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// CKE's default quota, nothing configured, the quota engine's quirks on (concurrent creations
// judged, and refused, together). Four one-per-node pods that fit the default (four 2XS beside
// the control plane: 32 vCPU / 40 GB) and, at the same time, one that only an XL holds, which
// the default does not. The XL goes as a probe, alone: had it been created within the same
// second as the 2XS, the engine would have refused them all. The fitting pods run, only the
// XL is refused, and it is never sent again.
func TestProbeNeverFliesBesideFittingLaunches(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor)`, harness.ProbeWaitRetried,
		`could not schedule pod`)
	env.Cluster.Operator().Configure(harness.PlatformQuirks)
	s.FreshController(nil)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	groups := s.RecordGroups(pool.Name, func(r harness.GroupRecord) bool { return r.Flavor == "XL" })
	fitting := s.Deployment("fitting", pool.Name, 4, "1", "1Gi", harness.OnePerNode)
	// Kept off the fitting pods' nodes, so that no fitting pod rides on the XL.
	big := s.Deployment("xl", pool.Name, 1, "13", "1Gi", harness.AwayFrom(fitting.Spec.Selector.MatchLabels))

	// G1: should the XL be refused first, its suspected leak holds the 2XS back for its
	// lifetime; then one round of launches and a join.
	start := time.Now()
	s.WaitRunning(fitting, 4, ctrlquota.LeakLifetime+2*harness.LaunchTimeout)
	t.Logf("four fitting pods Running %s after the pods were created, on %v", time.Since(start).Round(time.Second), s.PoolFlavors(pool.Name))
	Eventually(func() []harness.GroupRecord { return groups.Refused() }).WithTimeout(harness.LaunchTimeout).WithPolling(time.Second).ShouldNot(BeEmpty())
	s.ExpectStaysPending(big, pool.Name, "XL")

	Expect(harness.FlavorsOfRecords(groups.Refused())).To(Equal([]string{"XL"}), "refused creations: the XL probe, once")
	Expect(s.QuotaRefusals()).To(Equal(1.0))
	Expect(s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"flavor": "2XS", "outcome": "QuotaExceeded"})).To(BeZero(), "fitting launches refused")
	Expect(groups.ProbesFlewAlone()).To(BeEmpty(), "the XL beside other launches")
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("2XS", "2XS", "2XS", "2XS"))
}
