package raised

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// As shipped, on a raised quota: the organisation has 80 / 80 and the controller knows
// nothing. Twelve one-per-node 2XS pods need 48 / 48 beyond the control plane's 16 / 24, more
// than CKE's default leaves: the four the default holds launch together, the eight beyond it
// go as probes, one at a time (none beside another launch), and every pod runs without a
// single refused NodeGroup.
func TestRaisedQuotaIsClimbedWithoutRefusals(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Karpenter retries the launches the tracker holds back: beyond the sure limit while a
	// probe is in flight, for longer than the acceptance timeout.
	s.AllowErrors(`failed launching nodeclaim.*headroom`, harness.ProbeWaitRetried, `could not schedule pod`)
	// Probes fly one at a time, so the claims beyond the one in flight wait in Create without a
	// provider ID; when the verdicts come slowly (a loaded machine), core reports its cluster
	// state unsynced after 30 s. The climb's duration is logged below.
	s.AllowErrors(`cluster is waiting on sync for extended duration`)
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.QuotaCPU, o.QuotaRAMGB = 80, 80 })
	s.FreshController(nil) // knows no quota

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS"}, time.Minute, harness.OnDemand)
	// Four 2XS (16 / 16) fit beside the control plane in CKE's default: every later one is a
	// probe.
	groups := s.RecordGroups(pool.Name, func(r harness.GroupRecord) bool { return r.Index > 4 })
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
	Expect(s.QuotaRefusals()).To(Equal(0.0), "no NodeGroup refused: the quota was never exceeded")
	Expect(groups.Refused()).To(BeEmpty(), "refused creations, as the platform wrote them")
	Expect(s.PoolFlavors(pool.Name)).To(HaveLen(12))
	Expect(groups.Created()).To(Equal(12), "NodeGroups created: none refused, none deleted")
	Expect(groups.ProbesFlewAlone()).To(BeEmpty(), "probes beside other launches")
	most := <-inFlight
	t.Logf("probes in flight during the climb, sampled every 100 ms: at most %.0f", most)
	Expect(most).To(BeNumerically("<=", 1), "probes in flight")
	// Each accepted probe proved a little more: the proof covers all twelve beside the
	// control plane.
	Expect(s.Metric("karpenter_clevercloud_quota_limit_proven", map[string]string{"resource": "memory_gb"})).To(BeNumerically(">=", 24+48))
	Expect(s.Metric("karpenter_clevercloud_quota_probes_in_flight", nil)).To(BeZero())
}
