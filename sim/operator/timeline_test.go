package operator

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
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

// liveJoins are the live profile's join options (sim.LiveOptions cannot be imported here).
func liveJoins() Options {
	return Options{
		JoinDelay: 26 * time.Second, JoinDelayMax: 60 * time.Second, SlowJoinProbability: 0.02,
		SlowBootDelay: 185 * time.Second, SyncDelayMin: 38 * time.Second, SyncDelayMax: 58 * time.Second, Seed: 1,
	}
}

func groupNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("default-%05d", i)
	}
	return names
}

// A group's join depends on the seed and its name only, and the sync draw of a name is what
// it was before joins were drawn: runs recorded with a seed keep their Synced times.
func TestDrawJoinDelayIsReproducible(t *testing.T) {
	opts := liveJoins()
	other := opts
	other.Seed = 2
	differs := 0
	for _, name := range groupNames(50) {
		d := drawJoinDelay(opts, name)
		if again := drawJoinDelay(opts, name); again != d {
			t.Errorf("%s: drew %s then %s with the same seed", name, d, again)
		}
		if drawJoinDelay(other, name) != d {
			differs++
		}
	}
	if differs < 25 {
		t.Errorf("another seed changed %d of 50 joins", differs)
	}
	for _, name := range groupNames(50) {
		if d, was := drawSyncDelay(opts, name), drawSyncDelayBefore(opts, name); d != was {
			t.Errorf("%s: sync draw moved from %s to %s", name, was, d)
		}
	}
}

// drawSyncDelayBefore is drawSyncDelay as written before the join draw shared its seeding.
func drawSyncDelayBefore(opts Options, name string) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	r := rand.New(rand.NewPCG(opts.Seed, h.Sum64()))
	return opts.SyncDelayMin + time.Duration(r.Int64N(int64(opts.SyncDelayMax-opts.SyncDelayMin)+1))
}

// The drawn joins have the platform's shape (cke-platform.md §6, "~28 s typical; 26–60 s; up
// to 185 s"): within the spread but for the rare slow one, half of them by 28 s or so, a
// tail that still reaches the top.
func TestDrawJoinDelayHasThePlatformsShape(t *testing.T) {
	opts := liveJoins()
	const n = 4000
	var joins []time.Duration
	slow := 0
	for _, name := range groupNames(n) {
		d := drawJoinDelay(opts, name)
		switch {
		case d == opts.SlowBootDelay:
			slow++
		case d < opts.JoinDelay || d > opts.JoinDelayMax:
			t.Fatalf("%s: join %s outside %s–%s and not the slow %s", name, d, opts.JoinDelay, opts.JoinDelayMax, opts.SlowBootDelay)
		default:
			joins = append(joins, d)
		}
	}
	slices.Sort(joins)
	quantile := func(q float64) time.Duration { return joins[int(q*float64(len(joins)-1))] }
	if typical := opts.TypicalJoinDelay(); typical < 27*time.Second || typical > 29*time.Second {
		t.Errorf("typical join %s, want ~28 s", typical)
	}
	if m := quantile(0.5); (m - opts.TypicalJoinDelay()).Abs() > 500*time.Millisecond {
		t.Errorf("median join %s, TypicalJoinDelay says %s", m, opts.TypicalJoinDelay())
	}
	// The skew: a uniform draw would put a quarter of the joins under 34.5 s, this one over
	// half under 30 s; and the tail is there, past 55 s for some.
	if q := quantile(0.25); q > 27*time.Second {
		t.Errorf("first quartile %s: joins do not crowd the 26 s floor", q)
	}
	if q := quantile(0.75); q < 33*time.Second || q > 41*time.Second {
		t.Errorf("third quartile %s, want ~37 s", q)
	}
	if q := quantile(0.99); q < 55*time.Second {
		t.Errorf("99th percentile %s: the tail never reaches the minute", q)
	}
	if p := float64(slow) / n; p < 0.01 || p > 0.035 {
		t.Errorf("%d of %d joins slow (%.3f), want about %v", slow, n, p, opts.SlowJoinProbability)
	}
	if got := opts.LatestJoinDelay(); got != opts.SlowBootDelay {
		t.Errorf("latest join %s, want the slow %s", got, opts.SlowBootDelay)
	}
	opts.SlowJoinProbability = 1
	if d := drawJoinDelay(opts, "slow"); d != opts.SlowBootDelay {
		t.Errorf("certain slow join drew %s", d)
	}
}

// Without JoinDelayMax every group joins at JoinDelay, as before joins were drawn.
func TestDrawJoinDelayFixed(t *testing.T) {
	for _, opts := range []Options{{JoinDelay: time.Second}, {JoinDelay: 3 * time.Second, JoinDelayMax: time.Second}} {
		for _, name := range groupNames(20) {
			if d := drawJoinDelay(opts, name); d != opts.JoinDelay {
				t.Fatalf("%+v: %s drew %s", opts, name, d)
			}
		}
		if opts.TypicalJoinDelay() != opts.JoinDelay || opts.LatestJoinDelay() != opts.JoinDelay {
			t.Errorf("%+v: typical %s, latest %s", opts, opts.TypicalJoinDelay(), opts.LatestJoinDelay())
		}
	}
}

// plan puts the node at the group's drawn join and Synced after it: never before the node,
// at least the shortest measured join → Synced gap after it; a slow boot still wins, and with
// a fixed join the milestones are the ones the fixed join always had.
func TestPlanUsesTheDrawnJoin(t *testing.T) {
	o := &Operator{}
	now := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	live := liveJoins()
	fixed := live
	fixed.JoinDelay, fixed.JoinDelayMax, fixed.SlowJoinProbability = 28*time.Second, 0, 0
	joins := map[time.Duration]bool{}
	for _, name := range groupNames(500) {
		for _, opts := range []Options{live, fixed} {
			st := &groupState{joinDelay: drawJoinDelay(opts, name), syncDelay: drawSyncDelay(opts, name)}
			op := &operation{creation: true, start: now}
			o.plan(op, st, nil, opts, now)
			if op.join != st.joinDelay {
				t.Fatalf("%s: joins at %s, drew %s", name, op.join, st.joinDelay)
			}
			if gap := opts.SyncDelayMin - opts.JoinDelay; op.sync < op.join+gap || op.sync < st.syncDelay {
				t.Errorf("%s: join %s, Synced %s (drawn %s): want ≥ the draw and ≥ %s after the join", name, op.join, op.sync, st.syncDelay, gap)
			}
			if top := max(opts.JoinDelay, opts.JoinDelayMax); op.join <= top && op.sync != max(st.syncDelay, op.join+opts.SyncDelayMin-opts.JoinDelay) {
				t.Errorf("%s: join %s in the spread moved Synced from %s to %s", name, op.join, st.syncDelay, op.sync)
			}
			if opts.JoinDelayMax == 0 && op.sync != max(st.syncDelay+op.join-opts.JoinDelay, op.join) {
				t.Errorf("%s: fixed join, Synced at %s, was %s", name, op.sync, max(st.syncDelay+op.join-opts.JoinDelay, op.join))
			}
			joins[op.join] = true

			boot := &operation{creation: true, start: now}
			o.plan(boot, st, []Fault{FaultSlowBoot}, opts, now)
			if boot.join != opts.SlowBootDelay || boot.sync <= boot.join {
				t.Errorf("%s: slow boot joins at %s, Synced %s; want %s, then Synced", name, boot.join, boot.sync, opts.SlowBootDelay)
			}
			if opts.JoinDelayMax == 0 && boot.sync != st.syncDelay+opts.SlowBootDelay-opts.JoinDelay {
				t.Errorf("%s: fixed join's slow boot Synced at %s, was %s", name, boot.sync, st.syncDelay+opts.SlowBootDelay-opts.JoinDelay)
			}
		}
	}
	if len(joins) < 100 {
		t.Errorf("500 groups joined at %d distinct times", len(joins))
	}
}
