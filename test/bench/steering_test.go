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
// some by name, comma-separated) twice on one simulated CKE (BENCH_PROFILE, fast by default),
// with cost steering on, as shipped, then off, as make bench does on both profiles, and holds
// each pair to cost steering's targets (SteeringPair; BENCH_THRESHOLDS moves them). The node
// daemons run on every node and consolidation is on (BENCH_STEERING_CONSOLIDATE_AFTER, 30s);
// BENCH_STEERING_PODS pods per run (300) unless the workload has its own count;
// BENCH_STEERING_QUIET (consolidateAfter + 1m) and BENCH_STEERING_SETTLE (8m) say when a fleet
// has settled. A missed target fails the run once the report is written (BENCH_OUT).
func TestCostSteering(t *testing.T) {
	b := startChecked(t)
	b.steering(t, pickedWorkloads(nil))
}

// TestCostReplacement runs the provider's replacement of ill-shaped nodes (CostReplacement)
// on the workloads core alone packs onto nodes of another shape (ReplacementWorkloads;
// BENCH_STEERING_WORKLOADS picks others by name), on one profile, with the cost steering
// runs' pods, timing and node daemons, and holds each to its targets: the fleet after the
// replacement costs no more than the one core packed, and no node it launched is deleted again.
func TestCostReplacement(t *testing.T) {
	b := startChecked(t)
	b.replacement(t, pickedWorkloads(ReplacementWorkloads))
}

// startChecked starts the bench on one profile (startOneProfile) for a test whose missed
// targets fail it once the report is written.
func startChecked(t *testing.T) *Bench {
	b := startOneProfile(t)
	// Cleanups run last first: the report is written, then the misses fail the test.
	t.Cleanup(func() { b.write(t, b.Out) })
	t.Cleanup(func() {
		for _, m := range b.missed() {
			t.Errorf("missed target: %s", m)
		}
	})
	return b
}

// pickedWorkloads accepts the workloads BENCH_STEERING_WORKLOADS names (comma-separated),
// else those named in defaults, else every one.
func pickedWorkloads(defaults []string) func(Workload) bool {
	picked := os.Getenv("BENCH_STEERING_WORKLOADS")
	if picked == "" {
		picked = strings.Join(defaults, ",")
	}
	return func(w Workload) bool { return picked == "" || strings.Contains(","+picked+",", ","+w.Name+",") }
}

// replacement runs the provider's replacement of ill-shaped nodes on the cost workloads that
// pick accepts, the node daemons on every node.
func (b *Bench) replacement(t *testing.T, pick func(Workload) bool) {
	t.Helper()
	b.eachWorkload(t, pick, func(t *testing.T, w Workload, n int, tm SteeringTiming) { b.CostReplacement(t, w, n, tm) })
}

// eachWorkload runs run for each cost workload that pick accepts, as a subtest, with the node
// daemons on every node, the cost runs' pod count and timing.
func (b *Bench) eachWorkload(t *testing.T, pick func(Workload) bool, run func(t *testing.T, w Workload, n int, tm SteeringTiming)) {
	t.Helper()
	b.withNodeDaemons(t, func() {
		n := envInt("BENCH_STEERING_PODS", 300)
		tm := steeringTiming()
		for _, w := range CostWorkloads {
			if pick(w) {
				t.Run(w.Name, func(t *testing.T) { run(t, w, n, tm) })
			}
		}
	})
}

// withNodeDaemons runs run with the node daemons on every node.
func (b *Bench) withNodeDaemons(t *testing.T, run func()) {
	t.Helper()
	ctx := t.Context()
	if err := b.EnsureNodeDaemons(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.RemoveNodeDaemons(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	}()
	run()
}

// steering runs the cost workloads that pick accepts with steering on and off, the node
// daemons on every node.
func (b *Bench) steering(t *testing.T, pick func(Workload) bool) {
	t.Helper()
	b.eachWorkload(t, pick, func(t *testing.T, w Workload, n int, tm SteeringTiming) { b.SteeringPair(t, w, n, tm) })
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

// steeringTiming reads the cost steering runs' timing from the environment. The quiet window
// outlasts what consolidation takes to act on a node: consolidateAfter from the node's last
// pod event, then up to 10 s until core's disruption loop looks and 15 s for it to validate
// its decision, so a fleet is never priced just before consolidation would have changed it.
func steeringTiming() SteeringTiming {
	consolidateAfter := envDuration("BENCH_STEERING_CONSOLIDATE_AFTER", 30*time.Second)
	return SteeringTiming{
		Timeout:          envDuration("BENCH_SCALE_TIMEOUT", 5*time.Minute),
		ConsolidateAfter: consolidateAfter,
		Quiet:            envDuration("BENCH_STEERING_QUIET", consolidateAfter+time.Minute),
		Settle:           envDuration("BENCH_STEERING_SETTLE", 8*time.Minute),
	}
}
