package main

import (
	"strings"
	"testing"
	"time"
)

func TestSummaryRender(t *testing.T) {
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	r := runSummary{
		Launched: []string{"2XS", "XS", "2XS"},
		Wall:     sec(243.2),
		Steps: []stepRecord{
			{From: 0, To: 3, Running: sec(30.44), Settled: sec(31), Fleet: []string{"2XS"}, CostHourly: 0.0333},
			{From: 3, To: 8, Running: sec(29.6), Settled: sec(30.1), Fleet: []string{"XS", "2XS"}, CostHourly: 0.0944},
			// A scale-down: its pods were Running all along, no time to running.
			{From: 8, To: 3, Running: sec(0.5), Settled: sec(61), Fleet: []string{"2XS"}, CostHourly: 0.0333},
			{From: 3, To: 0, Settled: sec(40)},
		},
	}
	var b strings.Builder
	r.render(&b)
	want := `flavors launched: 2XS ×2, XS ×1 (3 NodeGroups)

    pods   all Running after   settled after    EUR/h  fleet
   0 → 3              30.4 s          31.0 s   0.0333  2XS
   3 → 8              29.6 s          30.1 s   0.0944  XS + 2XS
   8 → 3                   –          61.0 s   0.0333  2XS
   3 → 0                   –          40.0 s   0.0000  no worker node

peak cost 0.0944 EUR/h (XS + 2XS); whole story 4m3s
`
	if got := b.String(); got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
	if lines := strings.Count(want, "\n"); lines > 24 {
		t.Errorf("%d lines: more than one screen", lines)
	}
}

func TestSummaryNothingLaunched(t *testing.T) {
	var b strings.Builder
	runSummary{Steps: []stepRecord{{From: 0, To: 2, Settled: time.Second}}}.render(&b)
	got := b.String()
	for _, want := range []string{"flavors launched: none (0 NodeGroups)", "0 → 2", "no worker node", "peak cost 0.0000 EUR/h (no worker node)"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	// A scale-up whose pods never all ran says so rather than "0.0 s".
	if !strings.Contains(got, "–") {
		t.Errorf("no dash for the missing time to Running:\n%s", got)
	}
}
