package quotasim

import (
	"flag"
	"strings"
	"testing"
	"time"
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
	}
	t.Logf("%d seeds, %d steps: %d launches, %d accepted, %d refused (%d not called for by the real headroom), %d pods started; longest wait of a pod that fit: %s",
		*seeds, total.Steps, total.Launches, total.Accepted, total.Refusals, total.Undeserved, total.Started, total.LongestWait)
	if total.Accepted == 0 || total.Refusals == 0 {
		t.Fatalf("the histories exercised nothing: %d accepted, %d refused", total.Accepted, total.Refusals)
	}
}
