//go:build bench

package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBench runs every scenario one after the other on one simulated CKE and writes the
// report (BENCH_OUT, docs/bench with make bench). Knobs: BENCH_SCALE_PODS (1000),
// BENCH_SCALE_TIMEOUT (5m), BENCH_GATE_PODS (200), BENCH_QUOTA_WINDOW (60s),
// BENCH_CONSOLIDATION_QUIET (45s), BENCH_CONSOLIDATION_SETTLE (2m),
// BENCH_CONSOLIDATION_SETTLE_OPEN (2m). The defaults
// keep `make bench` under 15 minutes on a 2-core machine; the 5-minute quota window is
// BENCH_QUOTA_WINDOW=5m.
func TestBench(t *testing.T) {
	b := start(t)
	b.Out = outDir(t.TempDir())
	defer b.write(t, b.Out)
	scalePods := envInt("BENCH_SCALE_PODS", 1000)
	scaleTimeout := envDuration("BENCH_SCALE_TIMEOUT", 5*time.Minute)
	gatePods := envInt("BENCH_GATE_PODS", 200)
	quotaWindow := envDuration("BENCH_QUOTA_WINDOW", 60*time.Second)
	quiet := envDuration("BENCH_CONSOLIDATION_QUIET", 45*time.Second)
	b.Report.Verdicts = map[string]string{}
	b.Report.Budgets = map[string]string{}

	b.Report.HotPaths = runHotPaths()
	// Every scenario but the quota episodes and the as-shipped scale run: the quota lifted in
	// the simulator and configured in the controller (see QuotaKnown).
	b.Report.Simulator["controller quota setting"] = "CLEVER_CLOUD_QUOTA_CPU/MEMORY_GB=100000 (lifted, known) except where a scenario says otherwise"
	b.RestartOutside(t, QuotaKnown)
	t.Run("single", func(t *testing.T) { b.Single(t, 2*time.Minute) })
	settle := envDuration("BENCH_CONSOLIDATION_SETTLE", 2*time.Minute)
	// The open pool's replacements never launch (see the report), so it never settles; its
	// bound is separate.
	settleOpen := envDuration("BENCH_CONSOLIDATION_SETTLE_OPEN", 2*time.Minute)
	t.Run("burst50", func(t *testing.T) {
		_, c := b.BurstAndConsolidation(t, quiet, settleOpen, false)
		b.Report.Verdicts["consolidation, capacity-type open"] = consolidationVerdict(c)
	})
	t.Run("burst50-on-demand", func(t *testing.T) {
		_, c := b.BurstAndConsolidation(t, quiet, settle, true)
		b.Report.Verdicts["consolidation, capacity-type on-demand required"] = consolidationVerdict(c)
	})
	t.Run("burst10", func(t *testing.T) {
		r := b.Burst10(t)
		b.Report.Verdicts["issue 8 burst (10 NodeClaims, acceptance 1 s, target ≤ 2 s)"] = fmt.Sprintf("first NodeClaim → last NodeGroup accepted %.3f s (%s); of which first NodeClaim → last NodeGroup created (the provider's part) %.3f s, NodeGroup created → accepted %v s (simulated operator, configured delay 1 s)",
			r.Figures["firstClaimToLastAcceptedSeconds"], hitMiss(r.Figures["firstClaimToLastAcceptedSeconds"] <= 2 && r.Figures["firstClaimToLastAcceptedSeconds"] > 0),
			r.Figures["firstClaimToLastGroupCreatedSeconds"], r.Raw["groupCreatedToAcceptedSeconds"])
	})
	t.Run("quota-learned", func(t *testing.T) {
		r := b.QuotaEpisode(t, false, quotaWindow)
		b.Report.Verdicts["issue 8 quota episode, quota learned (target ≤ 1 rejected)"] = quotaVerdict(r, quotaWindow)
	})
	t.Run("quota-configured", func(t *testing.T) {
		r := b.QuotaEpisode(t, true, quotaWindow)
		b.Report.Verdicts["issue 8 quota episode, quota configured (target 0 rejected)"] = quotaVerdict(r, quotaWindow)
	})
	// Off first, then on, which the first scale run keeps: one restart (and its lease wait)
	// fewer. The quota is known to the controller in these three runs.
	var on, off *Result
	t.Run("gate-reservedcapacity-off", func(t *testing.T) {
		off = b.Scale(t, fmt.Sprintf("scale-%d-ReservedCapacity-off", gatePods), gatePods, scaleTimeout, true, With(QuotaKnown, map[string]string{"FEATURE_GATES": "NodeRepair=false,ReservedCapacity=false"}))
	})
	t.Run("gate-reservedcapacity-on", func(t *testing.T) {
		on = b.Scale(t, fmt.Sprintf("scale-%d-ReservedCapacity-on", gatePods), gatePods, scaleTimeout, true, QuotaKnown)
	})
	if on != nil && off != nil {
		b.Report.Verdicts["ReservedCapacity gate"] = gateVerdict(on, off)
	}
	t.Run("scale", func(t *testing.T) {
		r := b.Scale(t, fmt.Sprintf("scale-%d", scalePods), scalePods, scaleTimeout, false, QuotaKnown)
		budgets(b.Report, r, "quota known")
	})
	// As shipped: the bundle's environment, quota not configured, so beyond CKE's default
	// 40 vCPU / 40 GB the controller probes, one launch more per accepted probe.
	t.Run("scale-as-shipped", func(t *testing.T) {
		r := b.Scale(t, fmt.Sprintf("scale-%d-as-shipped", scalePods), scalePods, scaleTimeout, true, nil)
		budgets(b.Report, r, "as shipped, quota not configured")
	})
}

func consolidationVerdict(c *Result) string {
	v := fmt.Sprintf("fleet %.4f → %.4f €/h (bound %.4f), last fleet change %gs after the scale-down, %g NodeClaims deleted, %g replacement NodeClaims never launched",
		c.Figures["fleetHourlyBefore"], costOf(c), boundOf(c), c.Figures["scaleDownToLastFleetChangeSeconds"], c.Figures["nodeClaimsDeleted"], c.Figures["replacementNodeClaimsNeverLaunched"])
	if len(c.Misses) > 0 {
		v += "; " + strings.Join(c.Misses, "; ")
	}
	return v
}

func costOf(r *Result) float64 {
	if r.Cost == nil {
		return 0
	}
	return r.Cost.FleetHourly
}

func boundOf(r *Result) float64 {
	if r.Cost == nil {
		return 0
	}
	return r.Cost.Bound.CostHourly
}

func hitMiss(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func quotaVerdict(r *Result, window time.Duration) string {
	return fmt.Sprintf("%d NodeGroups rejected by the quota engine over %s (%s); %g pods Running, %g Pending; steady state %gs after the pods were created",
		r.Rejected, window, hitMiss(len(r.Misses) == 0), r.Figures["podsRunning"], r.Figures["podsPending"], r.Figures["timeToSteadyStateSeconds"])
}

func gateVerdict(on, off *Result) string {
	f := func(r *Result) string {
		return fmt.Sprintf("all pods bound %gs, all Running %gs, last NodeClaim %gs after the first pod; %.0f scheduling simulations taking %.2f s; controller %.1f CPU s, peak heap %.0f MB",
			r.Figures["firstPodToAllBoundSeconds"], r.Figures["firstPodToAllRunningSeconds"], r.Figures["firstPodToLastNodeClaimSeconds"],
			r.Footprint.SchedulingSimulations, r.Footprint.SchedulingSeconds, r.Footprint.CPUSeconds, r.Footprint.PeakHeapMB)
	}
	return fmt.Sprintf("on (core default): %s. off: %s. One run each on a shared machine: see the scenario sections for the full figures.", f(on), f(off))
}

// budgets compares the scale run with Karpenter's KWOK performance budgets.
func budgets(rep *Report, r *Result, variant string) {
	rep.Budgets["pods scheduled < 2 min ("+variant+")"] = fmt.Sprintf("%d pods: last NodeClaim created %gs, every pod bound %gs, every pod Running %gs after the first pod was created (%s)",
		r.Pods, r.Figures["firstPodToLastNodeClaimSeconds"], r.Figures["firstPodToAllBoundSeconds"], r.Figures["firstPodToAllRunningSeconds"],
		hitMiss(len(r.Misses) == 0 && r.Figures["firstPodToAllBoundSeconds"] > 0 && r.Figures["firstPodToAllBoundSeconds"] < 120))
	rep.Budgets["heap P95 < 120 MB ("+variant+")"] = fmt.Sprintf("%.1f MB (peak %.1f MB) (%s)", r.Footprint.P95HeapMB, r.Footprint.PeakHeapMB, hitMiss(r.Footprint.P95HeapMB < 120))
	rep.Budgets["average CPU < 0.5 cores ("+variant+")"] = fmt.Sprintf("%.3f cores over the %gs window (%.1f CPU s) (%s)", r.Footprint.AvgCores, r.WallSeconds, r.Footprint.CPUSeconds, hitMiss(r.Footprint.AvgCores < 0.5))
}
