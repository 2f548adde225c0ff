package bench

import (
	"math"
	"sort"
	"time"
)

// Series are a window's figures over time, for the report's charts: counts as step functions
// (each point's value holds until the next point), time in seconds since the window opened,
// at SeriesResolution.
type Series struct {
	EndSeconds  float64 `json:"endSeconds"`
	PodsPending []Point `json:"podsPending"`
	PodsRunning []Point `json:"podsRunning"`
	// Nodes are the Nodes of Karpenter's NodeGroups, from joined to gone.
	Nodes []Point `json:"nodes"`
	// FleetHourly prices the decided, not deleting, managed NodeGroups (the Cost's fleet).
	FleetHourly []Point `json:"fleetHourly,omitempty"`
	// PendingToRunningSeconds: each pod of the window, created → Running and Ready, sorted.
	PendingToRunningSeconds []float64 `json:"pendingToRunningSeconds,omitempty"`
}

// Point is (seconds since the window opened, value); JSON [t, v], compact in report.json.
type Point [2]float64

// SeriesResolution: changes closer than this collapse into one point (the later value): a
// chart 800 px wide cannot show them apart, and report.json stays small at 1000 pods.
const SeriesResolution = 0.1

// change is a step function's increment d at t seconds.
type change struct{ t, d float64 }

// stepSeries integrates the changes into a step function on [0, end]: one point at 0 with
// what happened up to then, one per resolution bucket where the value changed, and the last
// value at end. Changes before 0 count at 0; after end they are dropped. round tidies the
// running sums (float sums of prices would otherwise drift by 1e-17).
func stepSeries(changes []change, end float64, round func(float64) float64) []Point {
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].t < changes[j].t })
	// Changes are kept up to the exact end; the points say it to the millisecond (a change a
	// fraction of a millisecond before the end must not fall off by the rounding).
	last := round3(end)
	bucket := func(t float64) float64 {
		return min(round3(math.Round(max(t, 0)/SeriesResolution)*SeriesResolution), last)
	}
	out := []Point{{0, 0}}
	v := 0.0
	for i := 0; i < len(changes); {
		t := bucket(changes[i].t)
		if changes[i].t > end {
			break
		}
		for ; i < len(changes) && changes[i].t <= end && bucket(changes[i].t) == t; i++ {
			v += changes[i].d
		}
		v = round(v)
		last := &out[len(out)-1]
		switch {
		case last[0] == t:
			last[1] = v
		case last[1] != v:
			out = append(out, Point{t, v})
		}
	}
	if out[len(out)-1][0] < last {
		out = append(out, Point{last, v})
	}
	return out
}

func whole(v float64) float64 { return math.Round(v) }

// series builds the window's pod and node series from the timeline (locked), from start to
// end; e2e are the pods' pending → Running seconds.
func series(tl *Timeline, start, end time.Time, e2e []float64) *Series {
	rel := func(t time.Time) float64 { return t.Sub(start).Seconds() }
	var pending, running, nodes []change
	for _, p := range tl.Pods {
		pending = append(pending, change{rel(p.Created), 1})
		out := firstOf(p.Running, p.DeletedAt)
		if !out.IsZero() {
			pending = append(pending, change{rel(out), -1})
		}
		if !p.Running.IsZero() && (p.DeletedAt.IsZero() || p.Running.Before(p.DeletedAt)) {
			running = append(running, change{rel(p.Running), 1})
			if !p.DeletedAt.IsZero() {
				running = append(running, change{rel(p.DeletedAt), -1})
			}
		}
	}
	for _, n := range tl.Nodes {
		if g := tl.Groups[n.Group]; g == nil || !g.Managed {
			continue // the control plane's, or out of band
		}
		nodes = append(nodes, change{rel(n.Created), 1})
		if !n.GoneAt.IsZero() {
			nodes = append(nodes, change{rel(n.GoneAt), -1})
		}
	}
	// Map order must not leak into the output: sort each input before the stable sort.
	for _, cs := range [][]change{pending, running, nodes} {
		sort.Slice(cs, func(i, j int) bool { return cs[i].t < cs[j].t || cs[i].t == cs[j].t && cs[i].d < cs[j].d })
	}
	e := end.Sub(start).Seconds()
	s := &Series{
		EndSeconds:  round3(e),
		PodsPending: stepSeries(pending, e, whole),
		PodsRunning: stepSeries(running, e, whole),
		Nodes:       stepSeries(nodes, e, whole),
	}
	if len(e2e) > 0 {
		s.PendingToRunningSeconds = roundAll(e2e)
		sort.Float64s(s.PendingToRunningSeconds)
	}
	return s
}

// fleetSeries prices the decided managed NodeGroups over the window (timeline locked): each
// from its decision until it started deleting.
func fleetSeries(tl *Timeline, start, end time.Time, price map[string]float64) []Point {
	rel := func(t time.Time) float64 { return t.Sub(start).Seconds() }
	var cs []change
	for _, name := range sortedKeys(tl.Groups) {
		g := tl.Groups[name]
		if !g.Managed || g.Decided.IsZero() {
			continue
		}
		cs = append(cs, change{rel(g.Decided), price[g.Flavor]})
		if !g.Deleting.IsZero() {
			cs = append(cs, change{rel(g.Deleting), -price[g.Flavor]})
		}
	}
	return stepSeries(cs, end.Sub(start).Seconds(), round4)
}
