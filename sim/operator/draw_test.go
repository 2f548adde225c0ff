package operator

import (
	"testing"
	"time"
)

func TestDrawSyncDelay(t *testing.T) {
	opts := Options{SyncDelayMin: 38 * time.Second, SyncDelayMax: 58 * time.Second, Seed: 7}
	seen := map[time.Duration]bool{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		d := drawSyncDelay(opts, name)
		if d < opts.SyncDelayMin || d > opts.SyncDelayMax {
			t.Errorf("%s: %s outside [%s, %s]", name, d, opts.SyncDelayMin, opts.SyncDelayMax)
		}
		if again := drawSyncDelay(opts, name); again != d {
			t.Errorf("%s: drew %s then %s with the same seed", name, d, again)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Errorf("every group drew the same delay: %v", seen)
	}
	other := opts
	other.Seed = 8
	differs := false
	for _, name := range []string{"a", "b", "c", "d"} {
		differs = differs || drawSyncDelay(other, name) != drawSyncDelay(opts, name)
	}
	if !differs {
		t.Error("another seed drew the same delays")
	}
	opts.SlowSyncProbability, opts.SlowSyncDelay = 1, 390*time.Second
	if d := drawSyncDelay(opts, "slow"); d != 390*time.Second {
		t.Errorf("certain outlier drew %s, want 6m30s", d)
	}
}
