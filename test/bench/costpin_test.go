//go:build bench

package bench

import (
	"testing"
	"time"
)

// TestCostPin runs the scale pods twice on one simulated CKE (BENCH_PROFILE, fast by
// default): on a NodePool open to every flavor, then on one pinned to MatchedFlavors, and
// reports each fleet's cost against the packing bound (BENCH_OUT for the report). The pinned
// fleet must cost less than the open one.
func TestCostPin(t *testing.T) {
	b := startOneProfile(t)
	defer b.write(t, b.Out)
	b.RestartOutside(t, QuotaKnown)
	n := envInt("BENCH_SCALE_PODS", 1000)
	timeout := envDuration("BENCH_SCALE_TIMEOUT", 5*time.Minute)
	var open, pinned *Result
	t.Run("open", func(t *testing.T) { open = b.Scale(t, "scale-open", n, timeout, false, QuotaKnown) })
	t.Run("pinned", func(t *testing.T) { pinned = b.ScalePinned(t, "scale-pinned", n, timeout, MatchedFlavors) })
	if open == nil || pinned == nil || open.Cost == nil || pinned.Cost == nil {
		t.Fatal("a run has no cost figures")
	}
	t.Logf("open:   fleet %.4f €/h %v, bound %.4f, ratio %.2f", open.Cost.FleetHourly, open.Cost.Fleet, open.Cost.Bound.CostHourly, open.Cost.Ratio)
	t.Logf("pinned: fleet %.4f €/h %v, bound %.4f, ratio %.2f", pinned.Cost.FleetHourly, pinned.Cost.Fleet, pinned.Cost.Bound.CostHourly, pinned.Cost.Ratio)
	if pinned.Cost.FleetHourly >= open.Cost.FleetHourly {
		t.Errorf("the pinned fleet costs %.4f €/h, not less than the open one's %.4f", pinned.Cost.FleetHourly, open.Cost.FleetHourly)
	}
}
