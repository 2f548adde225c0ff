package operator

import (
	"testing"
	"time"
)

// An operation's milestones are work from its start: an upstream-error window pauses it.
func TestOperationPausesInUpstreamErrorWindows(t *testing.T) {
	t0 := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	op := &operation{start: t0}
	win := func(from, until time.Duration) window { return window{from: at(from), until: at(until)} }
	for name, c := range map[string]struct {
		ws   []window
		work time.Duration
		want time.Duration
	}{
		"no window":                  {nil, 28 * time.Second, 28 * time.Second},
		"window after the milestone": {[]window{win(30*time.Second, time.Minute)}, 28 * time.Second, 28 * time.Second},
		"milestone at its start":     {[]window{win(28*time.Second, time.Minute)}, 28 * time.Second, 28 * time.Second},
		"window over the milestone":  {[]window{win(10*time.Second, 20*time.Second)}, 28 * time.Second, 38 * time.Second},
		"window from the start":      {[]window{win(-5*time.Second, 5*time.Second)}, 28 * time.Second, 33 * time.Second},
		"window over before start":   {[]window{win(-10*time.Second, -5*time.Second)}, 28 * time.Second, 28 * time.Second},
		"overlapping windows":        {[]window{win(10*time.Second, 20*time.Second), win(15*time.Second, 25*time.Second)}, 28 * time.Second, 43 * time.Second},
		"two windows":                {[]window{win(5*time.Second, 10*time.Second), win(20*time.Second, 30*time.Second)}, 28 * time.Second, 43 * time.Second},
	} {
		if got := op.at(c.work, c.ws); !got.Equal(at(c.want)) {
			t.Errorf("%s: reached at %s, want %s", name, got.Sub(t0), c.want)
		}
	}
	if got := op.at(never, []window{win(0, time.Second)}); !got.IsZero() {
		t.Errorf("never reached at %s", got)
	}
	// The operation's own window and the platform's, sorted.
	op.fault = win(20*time.Second, 25*time.Second)
	ws := op.windows(Options{UpstreamErrorFrom: at(5 * time.Second), UpstreamErrorFor: 5 * time.Second})
	if len(ws) != 2 || !ws[0].from.Equal(at(5*time.Second)) || !ws[1].from.Equal(at(20*time.Second)) {
		t.Errorf("windows %+v", ws)
	}
	if !failing(ws, at(7*time.Second)) || failing(ws, at(10*time.Second)) || !failing(ws, at(20*time.Second)) {
		t.Error("failing misreads the windows")
	}
}

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
