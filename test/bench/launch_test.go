package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestHistSub(t *testing.T) {
	before := hist{count: 3, sum: 3}
	after := hist{count: 5, sum: 6}
	if d := after.sub(before); d.count != 2 || d.sum != 3 {
		t.Errorf("after − before = %+v, want 2 observations summing to 3", d)
	}
	// A restart resets the counters: the new process's figures stand alone.
	restarted := hist{count: 1, sum: 1}
	if d := restarted.sub(before); d != restarted {
		t.Errorf("after a restart: %+v, want the new process's figures", d)
	}
	var all hist
	all.add(after)
	all.add(restarted)
	if all.count != 6 || all.sum != 7 {
		t.Errorf("merged = %+v", all)
	}
}

func TestUnsynced(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tr := &syncedTrace{
		at:    []time.Time{at(0), at(100), at(200), at(300), at(400), at(500), at(600)},
		value: []float64{1, 0, 0, 1, 0, 1, 1},
	}
	u := tr.unsynced(at(0), at(700))
	if u.Samples != 7 || math.Abs(u.GaugeSeconds-0.3) > 1e-9 || math.Abs(u.LongestSeconds-0.2) > 1e-9 || math.Abs(u.MaxGapSeconds-0.1) > 1e-9 {
		t.Errorf("unsynced = %+v, want 7 samples, 0.3 s in all, longest 0.2 s, gap 0.1 s", u)
	}
	// The last sample holds until the window's end.
	tr.value[6] = 0
	if u := tr.unsynced(at(0), at(1000)); math.Abs(u.GaugeSeconds-0.7) > 1e-9 || math.Abs(u.MaxGapSeconds-0.4) > 1e-9 {
		t.Errorf("trailing 0: %+v, want 0.7 s in all, gap 0.4 s", u)
	}
}

func TestWithoutProviderID(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tl := newTimeline()
	tl.Claims["before"] = &ClaimTimes{Created: at(-5)}                                      // not the window's
	tl.Claims["a"] = &ClaimTimes{Created: at(1), ProviderID: at(2)}                         // [1, 2]
	tl.Claims["b"] = &ClaimTimes{Created: at(1.5), ProviderID: at(3)}                       // overlaps: [1, 3]
	tl.Claims["c"] = &ClaimTimes{Created: at(5), Deleting: at(5.5)}                         // refused, deleted: [5, 5.5]
	tl.Claims["d"] = &ClaimTimes{Created: at(9), ProviderID: time.Time{}, Deleting: at(20)} // open at the end: [9, 10]
	if got := tl.withoutProviderID(at(0), at(10)); got != 3500*time.Millisecond {
		t.Errorf("without provider ID = %s, want 3.5s", got)
	}
}

func TestChecksTable(t *testing.T) {
	yes, no := true, false
	r := &Report{
		Profiles: map[string]map[string]string{"fast": {}, "live": {}},
		Checks: []Check{
			{Measure: "m1", Profile: "live", Target: "≤ 3 s", Value: "1 s", Met: &yes},
			{Measure: "m2", Profile: "live", Target: "0", Value: "2", Met: &no},
			{Measure: "m1", Profile: "fast", Target: "≤ 3 s", Value: "the scenario failed"},
		},
	}
	md := r.Markdown()
	for _, want := range []string{
		"| measure | live | fast |",
		"| m1 | ✅ 1 s (target ≤ 3 s) | – the scenario failed (target ≤ 3 s) |",
		"| m2 | ❌ **2** (target 0) | – |",
		"live: 1 met, 1 missed. fast: 0 met, 0 missed.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
