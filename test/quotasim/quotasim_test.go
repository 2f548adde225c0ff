package quotasim

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

var (
	seeds    = flag.Int("quotasim.seeds", 2000, "how many seeds (histories) to run")
	first    = flag.Uint64("quotasim.seed", 1, "the first seed; run one failing seed with -quotasim.seeds=1 -quotasim.seed=N")
	trace    = flag.Bool("quotasim.trace", false, "print every seed's trace")
	duration = flag.Duration("quotasim.duration", time.Hour, "simulated time per seed")
)

// TestSeeds runs the quota tracker against the simulated CKE's quota engine over many random
// histories and fails on the first seed that breaks a guarantee, printing its trace.
func TestSeeds(t *testing.T) {
	var total Stats
	for seed := *first; seed < *first+uint64(*seeds); seed++ {
		w := New(Config{Seed: seed, Duration: *duration})
		if v := w.Run(); v != nil {
			t.Fatalf("%v\nreproduce: go test ./test/quotasim -run TestSeeds -quotasim.seeds=1 -quotasim.seed=%d", v, seed)
		}
		if *trace {
			t.Logf("seed %d:\n%s", seed, strings.Join(w.trace, "\n"))
		}
		total.Steps += w.Stats.Steps
		total.Launches += w.Stats.Launches
		total.Accepted += w.Stats.Accepted
		total.Refusals += w.Stats.Refusals
		total.Undeserved += w.Stats.Undeserved
		total.Started += w.Stats.Started
		total.LongestWait = max(total.LongestWait, w.Stats.LongestWait)
		total.Waits = append(total.Waits, w.Stats.Waits...)
		total.ProbeRefusals += w.Stats.ProbeRefusals
		total.UnmetDemand += w.Stats.UnmetDemand
		total.MaxProbeRefusalsInAnHour = max(total.MaxProbeRefusalsInAnHour, w.Stats.MaxProbeRefusalsInAnHour)
	}
	t.Logf("%d seeds, %d steps: %d launches, %d accepted, %d refused (%d not called for by the real headroom), %d pods started",
		*seeds, total.Steps, total.Launches, total.Accepted, total.Refusals, total.Undeserved, total.Started)
	slices.Sort(total.Waits)
	if n := len(total.Waits); n > 0 {
		t.Logf("uptake, from room upstream for a pod to its group (G1, bound %s): %d pods, p50 %s, p99 %s, max %s",
			quota.UptakeBound, n, total.Waits[n/2], total.Waits[n*99/100], total.Waits[n-1])
	}
	if total.UnmetDemand > 0 {
		t.Logf("refused probes under demand the platform could not meet: %d in %s (%.2f per hour); most in any hour of one history: %d (G2: at most %d)",
			total.ProbeRefusals, total.UnmetDemand.Round(time.Minute), float64(total.ProbeRefusals)/total.UnmetDemand.Hours(), total.MaxProbeRefusalsInAnHour, quota.MaxProbeRefusalsPerHour)
	}
	if total.Accepted == 0 || total.Refusals == 0 {
		t.Fatalf("the histories exercised nothing: %d accepted, %d refused", total.Accepted, total.Refusals)
	}
}
