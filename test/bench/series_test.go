package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStepSeries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changes []change
		end     float64
		want    []Point
	}{
		{"empty", nil, 5, []Point{{0, 0}, {5, 0}}},
		{"empty, zero-length window", nil, 0, []Point{{0, 0}}},
		{"before the window counts at 0", []change{{-2, 3}, {1, -1}}, 4, []Point{{0, 3}, {1, 2}, {4, 2}}},
		{"same bucket collapses to the later value", []change{{1.01, 1}, {1.04, 1}, {1.02, -1}}, 2, []Point{{0, 0}, {1, 1}, {2, 1}}},
		{"no point where nothing changes", []change{{1, 1}, {2, 1}, {2, -1}, {3, -1}}, 3, []Point{{0, 0}, {1, 1}, {3, 0}}},
		{"after the window dropped", []change{{1, 2}, {9, 5}}, 3, []Point{{0, 0}, {1, 2}, {3, 2}}},
		{"rounding up to the end stays at the end", []change{{2.955, 1}}, 2.96, []Point{{0, 0}, {2.96, 1}}},
		{"a change at an end that rounds down counts", []change{{2.9604, 1}}, 2.9604, []Point{{0, 0}, {2.96, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stepSeries(tc.changes, tc.end, whole); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	// Float sums of prices come back tidy.
	got := stepSeries([]change{{1, 0.0333}, {2, 0.0611}, {3, -0.0611}, {4, -0.0333}}, 5, round4)
	if want := []Point{{0, 0}, {1, 0.0333}, {2, 0.0944}, {3, 0.0333}, {4, 0}, {5, 0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("prices: got %v, want %v", got, want)
	}
}

// syntheticTimeline: three pods (one deleted while pending), two Karpenter nodes (one gone),
// a control-plane node, and their NodeGroups (one refused, one deleted later).
func syntheticTimeline(t0 time.Time) *Timeline {
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tl := newTimeline()
	tl.Pods["a"] = &PodTimes{Created: at(0), Running: at(3)}
	tl.Pods["b"] = &PodTimes{Created: at(1), Running: at(5), DeletedAt: at(8), Deleted: true}
	tl.Pods["c"] = &PodTimes{Created: at(1), DeletedAt: at(2), Deleted: true}
	tl.Groups["cp"] = &GroupTimes{Created: at(-60), Decided: at(-59), Flavor: "S"}
	tl.Groups["g1"] = &GroupTimes{Created: at(1), Decided: at(1.2), Flavor: "2XS", Managed: true}
	tl.Groups["g2"] = &GroupTimes{Created: at(1), Decided: at(1.2), Deleting: at(7), Flavor: "XS", Managed: true}
	tl.Groups["g3"] = &GroupTimes{Created: at(1), Rejected: at(1.2), Flavor: "XL", Managed: true}
	tl.Nodes["cp-node0"] = &NodeTimes{Created: at(-30), Group: "cp"}
	tl.Nodes["g1-node0"] = &NodeTimes{Created: at(2.5), Group: "g1"}
	tl.Nodes["g2-node0"] = &NodeTimes{Created: at(2.5), Group: "g2", GoneAt: at(9), Gone: true}
	return tl
}

func TestSeriesFromTimeline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tl := syntheticTimeline(t0)
	end := t0.Add(10 * time.Second)
	s := series(tl, t0, end, []float64{4, 3.00049})
	check := func(name string, got, want []Point) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
	check("pending", s.PodsPending, []Point{{0, 1}, {1, 3}, {2, 2}, {3, 1}, {5, 0}, {10, 0}})
	check("running", s.PodsRunning, []Point{{0, 0}, {3, 1}, {5, 2}, {8, 1}, {10, 1}})
	check("nodes (Karpenter's only)", s.Nodes, []Point{{0, 0}, {2.5, 2}, {9, 1}, {10, 1}})
	if s.EndSeconds != 10 || !reflect.DeepEqual(s.PendingToRunningSeconds, []float64{3, 4}) {
		t.Errorf("end %v, pending → Running %v", s.EndSeconds, s.PendingToRunningSeconds)
	}
	fleet := fleetSeries(tl, t0, end, map[string]float64{"2XS": 0.0333, "XS": 0.0611, "S": 0.0889, "XL": 0.2222})
	check("fleet (decided managed groups until deleting)", fleet, []Point{{0, 0}, {1.2, 0.0944}, {7, 0.0333}, {10, 0.0333}})
	// report.json carries points as [t, v] pairs.
	js, err := json.Marshal(s.Nodes)
	if err != nil || string(js) != "[[0,0],[2.5,2],[9,1],[10,1]]" {
		t.Errorf("nodes as JSON %s (%v)", js, err)
	}
}

var chartLink = regexp.MustCompile(`!\[[^\]]*\]\(([^)]+)\)`)

// The report links each chart it writes, relatively, and every link resolves; a second write
// with fewer runs removes the charts it no longer has; the same report gives the same bytes.
func TestReportCharts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	full := &Result{Name: "single", Profile: "fast", Series: series(syntheticTimeline(t0), t0, t0.Add(10*time.Second), []float64{3, 4}),
		Cost: &Cost{FleetHourly: 0.0333, Bound: Bound{CostHourly: 0.0333}}, PendingToRunning: stat([]float64{3, 4})}
	full.Series.FleetHourly = []Point{{0, 0}, {1.2, 0.0944}, {7, 0.0333}, {10, 0.0333}}
	empty := &Result{Name: "quota episode/learned", Profile: "live", Series: series(newTimeline(), t0, t0.Add(5*time.Second), nil)}
	noSeries := &Result{Name: "old", Profile: "live"}
	r := &Report{Results: []*Result{full, empty, noSeries}}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	written := func() []string {
		fs, err := filepath.Glob(filepath.Join(dir, ChartsDir, "*.svg"))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range fs {
			out = append(out, ChartsDir+"/"+filepath.Base(f))
		}
		return out
	}
	links := func() []string {
		md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range chartLink.FindAllStringSubmatch(string(md), -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return out
	}
	want := []string{
		"charts/quota-episode-learned-live-pods-nodes.svg",
		"charts/single-fast-cost.svg", "charts/single-fast-latency.svg", "charts/single-fast-pods-nodes.svg",
	}
	if got := written(); !reflect.DeepEqual(got, want) {
		t.Errorf("charts written %v, want %v", got, want)
	}
	if got := links(); !reflect.DeepEqual(got, want) {
		t.Errorf("REPORT.md links %v, want exactly the charts written %v", got, want)
	}
	first, err := os.ReadFile(filepath.Join(dir, want[1]))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(first), "lower bound") {
		t.Error("the cost chart has no lower-bound line")
	}
	r.Results = []*Result{full}
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	if got := written(); !reflect.DeepEqual(got, want[1:]) || !reflect.DeepEqual(links(), want[1:]) {
		t.Errorf("after a report without the quota run: charts %v, links %v, want %v", got, links(), want[1:])
	}
	again, err := os.ReadFile(filepath.Join(dir, want[1]))
	if err != nil || string(again) != string(first) {
		t.Errorf("the same run's chart changed between two writes (%v)", err)
	}
}
