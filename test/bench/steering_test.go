//go:build bench

package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCostSteering runs each cost workload (CostWorkloads; BENCH_STEERING_WORKLOADS picks
// some by name, comma-separated) twice on one simulated CKE (BENCH_PROFILE, fast by default):
// with cost steering on, as shipped, then off, with the node daemons on every node and
// consolidation on (BENCH_STEERING_CONSOLIDATE_AFTER, 30s), and reports each settled fleet
// against the bound beside the other (BENCH_OUT for the report). BENCH_STEERING_PODS pods per
// run (300); BENCH_CONSOLIDATION_QUIET (45s) and BENCH_STEERING_SETTLE (5m) say when a fleet has
// settled. It fails where steering costs more than without it, or settles above 1.10 × the
// bound (STEERING_BOUND_RATIO overrides the target).
func TestCostSteering(t *testing.T) {
	b := startOneProfile(t)
	defer b.write(t, b.Out)
	ctx := context.Background()
	if err := b.EnsureNodeDaemons(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.RemoveNodeDaemons(ctx); err != nil {
			t.Error(err)
		}
	}()
	n := envInt("BENCH_STEERING_PODS", 300)
	timeout := envDuration("BENCH_SCALE_TIMEOUT", 5*time.Minute)
	consolidateAfter := envDuration("BENCH_STEERING_CONSOLIDATE_AFTER", 30*time.Second)
	quiet := envDuration("BENCH_CONSOLIDATION_QUIET", 45*time.Second)
	settle := envDuration("BENCH_STEERING_SETTLE", 5*time.Minute)
	target := envFloat("STEERING_BOUND_RATIO", 1.10)
	picked := os.Getenv("BENCH_STEERING_WORKLOADS")
	for _, w := range CostWorkloads {
		if picked != "" && !strings.Contains(","+picked+",", ","+w.Name+",") {
			continue
		}
		t.Run(w.Name, func(t *testing.T) {
			var on, off *Result
			t.Run("on", func(t *testing.T) { on = b.CostSteering(t, w, n, true, timeout, consolidateAfter, quiet, settle) })
			t.Run("off", func(t *testing.T) { off = b.CostSteering(t, w, n, false, timeout, consolidateAfter, quiet, settle) })
			if on == nil || off == nil || on.Cost == nil || off.Cost == nil {
				t.Fatal("a run has no cost figures")
			}
			for _, r := range []*Result{on, off} {
				t.Logf("%s: settled fleet %.4f €/h %v, bound %.4f %v, ratio %.3f (at launch %.3f), %v NodeGroups launched, %v deleted, all Running in %vs",
					r.Name, r.Cost.FleetHourly, r.Cost.Fleet, r.Cost.Bound.CostHourly, r.Cost.Bound.Fleet, r.Cost.Ratio, r.Figures["launchRatio"],
					r.Figures["nodeGroupsLaunched"], r.Figures["nodeGroupsDeleted"], r.Figures["firstPodToAllRunningSeconds"])
			}
			if on.Cost.FleetHourly > off.Cost.FleetHourly+1e-9 {
				t.Errorf("%s: steering on costs %.4f €/h, more than off (%.4f)", w.Name, on.Cost.FleetHourly, off.Cost.FleetHourly)
			}
			if on.Cost.Ratio > target {
				t.Errorf("%s: steering on settles at %.3f × the bound, above %.2f", w.Name, on.Cost.Ratio, target)
			}
		})
	}
}

// startOneProfile starts the bench on one profile for a test that is not make bench's:
// BENCH_PROFILE, fast when unset or both; the report goes to BENCH_OUT, else a temporary
// folder.
func startOneProfile(t *testing.T) *Bench {
	profile := os.Getenv("BENCH_PROFILE")
	if profile == "" || profile == "both" {
		profile = "fast"
	}
	b := start(t, profile)
	b.Out = outDir(t.TempDir())
	return b
}
