package headroom

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	ctrlquota "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// burstDecided is the target for a burst of ten launches: all decided within 5 s of
// the first NodeGroup's creation (verdicts come in about a second).
const burstDecided = 5 * time.Second

// defaultHolds2XS is how many 2XS (4 vCPU / 4 GB) CKE's default quota holds beside the
// control plane (16 / 24 of 40 / 40): memory runs out at four.
const defaultHolds2XS = 4

// timeline writes, for the log, when each group was created and decided, from the first
// creation.
func timeline(all []harness.GroupRecord) string {
	if len(all) == 0 {
		return "no group"
	}
	var b strings.Builder
	t0 := all[0].Created
	for _, r := range all {
		fmt.Fprintf(&b, "#%d created +%s decided +%s %s\n", r.Index, r.Created.Sub(t0).Round(10*time.Millisecond),
			r.Decided.Sub(t0).Round(10*time.Millisecond), r.Verdict)
	}
	return b.String()
}

// decidedWithin is how long after the first creation the last of records was decided.
func decidedWithin(records []harness.GroupRecord) time.Duration {
	var last time.Time
	for _, r := range records {
		if r.Decided.After(last) {
			last = r.Decided
		}
	}
	return last.Sub(records[0].Created)
}

// mostAwaiting is the most of records that awaited their decision at once.
func mostAwaiting(records []harness.GroupRecord) int {
	most := 0
	for _, at := range records {
		n := 0
		for _, r := range records {
			if !r.Created.After(at.Created) && (r.Decided.IsZero() || r.Decided.After(at.Created)) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// burst makes ten one-per-node 2XS pods on a fresh controller (settings.quota from quotaEnv,
// or none) and waits until ten NodeGroups are decided, all accepted; it returns them.
func burst(s *harness.Scenario, quotaEnv map[string]string, probe func(harness.GroupRecord) bool) ([]harness.GroupRecord, *harness.GroupRecorder) {
	s.T.Helper()
	s.AllowErrors(`failed launching nodeclaim.*headroom`, `could not schedule pod`, harness.ProbeWaitRetried)
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		harness.PlatformQuirks(o)
		o.QuotaCPU, o.QuotaRAMGB = 100, 100
	})
	s.FreshController(quotaEnv)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS"}, time.Minute, harness.OnDemand)
	groups := s.RecordGroups(pool.Name, probe)
	s.Deployment("burst", pool.Name, 10, "1", "1Gi", harness.OnePerNode)
	Eventually(func(g Gomega) {
		all := groups.All()
		g.Expect(all).To(HaveLen(10))
		for _, r := range all {
			g.Expect(r.Verdict).NotTo(BeEmpty())
		}
	}).WithTimeout(3*harness.LaunchTimeout).WithPolling(200*time.Millisecond).Should(Succeed(), "ten NodeGroups decided\n%s", groups)
	all := groups.All()
	s.T.Logf("burst of 10: first creation → last decision %s\n%s", decidedWithin(all).Round(10*time.Millisecond), timeline(all))
	for _, r := range all {
		// Accepted: Creating, or Synced when the watch saw no earlier status.
		Expect(r.Verdict).To(BeElementOf(ngv1.PhaseCreating, ngv1.PhaseSynced), "%s refused or gone\n%s", r.Name, groups)
	}
	return all, groups
}

// The organisation's quota is 100 / 100 and settings.quota says so; batch judging and leaks
// are on. A burst of ten one-per-node 2XS pods: the ten launches fly together, within the
// configured limit, and are all decided within 5 s of the first NodeGroup's creation, none
// refused.
func TestABurstOfTenOnAConfiguredQuotaIsDecidedWithinFiveSeconds(t *testing.T) {
	s := harness.NewScenario(t, env)
	all, _ := burst(s, map[string]string{"CLEVER_CLOUD_QUOTA_CPU": "100", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "100"}, nil)
	Expect(decidedWithin(all)).To(BeNumerically("<=", burstDecided), "first creation → last decision\n%s", timeline(all))
	Expect(s.QuotaRefusals()).To(BeZero())
}

// The same burst on a fresh cluster whose settings.quota is not set; the platform has room
// (100 / 100). CKE's default holds four 2XS beside the control plane: those four are only
// assumed to fit, so they fly at most two at a time (quota.AssumedInFlight); the six beyond
// the default are probes, each alone. Ten launches are then eight verdicts in a row (8.3 s
// measured at the suite's 1-s decision): the 5-s target needs a configured quota
// (docs/quota.md says why). Asserted: no more assumed launches in flight than
// quota.AssumedInFlight, every probe alone, every launch accepted.
func TestABurstOfTenOnAFreshClusterFliesTwoAssumedThenAProbeAtATime(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`cluster is waiting on sync for extended duration`)
	all, groups := burst(s, nil, func(r harness.GroupRecord) bool { return r.Index > defaultHolds2XS })
	Expect(mostAwaiting(all[:defaultHolds2XS])).To(BeNumerically("<=", ctrlquota.AssumedInFlight), "assumed launches awaiting their verdict at once\n%s", timeline(all))
	Expect(groups.ProbesFlewAlone()).To(BeEmpty(), "probes beside other launches")
	Expect(s.QuotaRefusals()).To(BeZero())
}

// CKE's default quota (40 / 40, the control plane using 16 / 24), another cluster of the
// organisation using 4 vCPU / 8 GB of it unseen: room for two 2XS. A burst of ten one-per-node
// 2XS pods on a fresh cluster: the launches only assumed to fit fly two at a time, so the
// round that finds the default taken costs two refused NodeGroups, not the four the default
// would hold nor the ten of the burst; the refusal ends the assumption, and nothing more is
// refused while the demand persists. Two pods run.
func TestABurstOnAnAssumedDefaultCostsAtMostTwoRefusals(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor)`, `could not schedule pod`, harness.ProbeWaitRetried,
		`cluster is waiting on sync for extended duration`)
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		harness.PlatformQuirks(o)
		o.OtherClusterCPU, o.OtherClusterGB = 4, 8
	})
	t.Cleanup(func() {
		env.Cluster.Operator().Configure(func(o *operator.Options) { o.OtherClusterCPU, o.OtherClusterGB = 0, 0 })
	})
	s.FreshController(nil)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS"}, time.Minute, harness.OnDemand)
	groups := s.RecordGroups(pool.Name, nil)
	d := s.Deployment("burst", pool.Name, 10, "1", "1Gi", harness.OnePerNode)
	Eventually(func() []harness.GroupRecord { return groups.Refused() }).WithTimeout(harness.LaunchTimeout).WithPolling(200 * time.Millisecond).ShouldNot(BeEmpty())
	Consistently(func() int { return len(groups.Refused()) }).WithTimeout(quotaWindow).WithPolling(time.Second).
		Should(BeNumerically("<=", ctrlquota.AssumedInFlight), "refused NodeGroups while the demand persists\n%s", groups)
	Eventually(func() int { n, _ := s.RunningPods(d); return n }).WithTimeout(harness.LaunchTimeout).WithPolling(250*time.Millisecond).
		Should(Equal(2), "running pods: the two the other cluster leaves room for")
	all := groups.All()
	t.Logf("burst of 10 beside another cluster's use: %d refused\n%s", len(groups.Refused()), timeline(all))
	Expect(mostAwaiting(all)).To(BeNumerically("<=", ctrlquota.AssumedInFlight), "launches awaiting their verdict at once\n%s", timeline(all))
	Expect(s.QuotaRefusals()).To(BeNumerically("<=", ctrlquota.AssumedInFlight), "refused NodeGroups, as the controller counted them")
}
