package bench

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
)

// The catalogue at the base prices (the fake price API's defaults).
func baseCatalogue() []FlavorCost {
	price := map[string]float64{"2XS": 0.0333, "XS": 0.0611, "S": 0.0889, "M": 0.1167, "L": 0.1667, "XL": 0.2222}
	var out []FlavorCost
	for _, f := range cke.Flavors() {
		_, a := cke.Resources(f)
		out = append(out, FlavorCost{Name: f.Name, CPUMilli: a.Cpu().MilliValue(), MemoryBytes: a.Memory().Value(), Pods: a.Pods().Value(), PriceHourly: price[f.Name]})
	}
	return out
}

const gi = 1 << 30

func TestLowerBound(t *testing.T) {
	cat := baseCatalogue()
	for _, tc := range []struct {
		name           string
		cpu, mem, pods int64
		want           float64
		fleet          map[string]int
	}{
		{"one small pod", 1000, 1 * gi, 1, 0.0333, map[string]int{"2XS": 1}},
		// Three 1 CPU / 1500Mi pods: 4.4 GiB > a 2XS's 3.6 GiB allocatable; one XS.
		{"three pods", 3000, 3 * 1500 << 20, 3, 0.0611, map[string]int{"XS": 1}},
		{"nothing", 0, 0, 0, 0, map[string]int{}},
		// 20 CPU of tiny memory: CPU-bound, 5 × 2XS (20 vCPU) at 0.1665 beats 2 × M (0.2334).
		{"cpu bound", 20000, 1 * gi, 20, 0.1665, map[string]int{"2XS": 5}},
		// 250 pods of 1m: pod slots bind (110 per node): 3 nodes.
		{"pod slots", 250, 250 << 20, 250, 3 * 0.0333, map[string]int{"2XS": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := LowerBound(cat, tc.cpu, tc.mem, tc.pods)
			if !b.Exact || math.Abs(b.CostHourly-tc.want) > 1e-9 {
				t.Fatalf("bound %+v, want %.4f", b, tc.want)
			}
			for k, v := range tc.fleet {
				if b.Fleet[k] != v {
					t.Errorf("fleet %v, want %v", b.Fleet, tc.fleet)
				}
			}
		})
	}
}

// The bound never exceeds any feasible fleet: checked against brute force on small demands.
func TestLowerBoundMatchesBruteForce(t *testing.T) {
	cat := baseCatalogue()
	for _, d := range [][3]int64{{7000, 9 * gi, 12}, {13500, 30 * gi, 40}, {42500, 67 * gi, 50}, {3000, 40 * gi, 5}} {
		got := LowerBound(cat, d[0], d[1], d[2])
		best := math.Inf(1)
		var rec func(i int, cpu, mem, pods int64, cost float64)
		rec = func(i int, cpu, mem, pods int64, cost float64) {
			if cpu <= 0 && mem <= 0 && pods <= 0 {
				best = math.Min(best, cost)
				return
			}
			if i == len(cat) || cost >= best {
				return
			}
			for k := int64(0); k <= 12; k++ {
				f := cat[i]
				rec(i+1, cpu-k*f.CPUMilli, mem-k*f.MemoryBytes, pods-k*f.Pods, cost+float64(k)*f.PriceHourly)
			}
		}
		rec(0, d[0], d[1], d[2], 0)
		if math.Abs(got.CostHourly-best) > 1e-9 {
			t.Errorf("demand %v: bound %.4f, brute force %.4f", d, got.CostHourly, best)
		}
	}
}

// The slowest join a run drew counts only the managed groups created by the time every pod
// ran: a control-plane group or a node launched afterwards (consolidation's) cannot have
// held a pod back, however slow its draw.
func TestSlowestJoin(t *testing.T) {
	t0 := time.Now()
	tl := syntheticTimeline(t0)
	ops := sim.LiveOptions().Operator
	want := max(ops.JoinDelayOf("g1"), ops.JoinDelayOf("g2"), ops.JoinDelayOf("g3"))
	// Names whose draws are slower than every counted group's, so that counting them shows.
	slower := func(prefix string) string {
		for i := range 10000 {
			if name := fmt.Sprintf("%s-%d", prefix, i); ops.JoinDelayOf(name) > want {
				return name
			}
		}
		t.Fatalf("no %s group draws a join slower than %s", prefix, want)
		return ""
	}
	tl.Groups[slower("late")] = &GroupTimes{Created: t0.Add(6 * time.Second), Flavor: "2XS", Managed: true}
	tl.Groups[slower("unmanaged")] = &GroupTimes{Created: t0.Add(time.Second), Flavor: "S"}
	if got := slowestJoin(tl, ops, t0.Add(5*time.Second)); got != want {
		t.Errorf("slowest join by 5 s: got %s, want %s", got, want)
	}
	if got := slowestJoin(tl, ops, t0.Add(500*time.Millisecond)); got != 0 {
		t.Errorf("slowest join before any managed group: got %s, want 0", got)
	}
}

func TestLaunchPasses(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tl := newTimeline()
	// A pass of three NodeClaims created together, one of two 1.2 s later, one alone 3 s later,
	// and one after the window.
	for i, s := range []float64{1, 1.05, 1.3, 2.5, 2.6, 5.6, 9} {
		tl.Claims[fmt.Sprint("c", i)] = &ClaimTimes{Created: at(s)}
	}
	tl.Claims["before"] = &ClaimTimes{Created: at(-1)}
	if got := launchPasses(tl, t0, at(8)); got != 3 {
		t.Errorf("passes in [0 s, 8 s]: got %d, want 3", got)
	}
	if got := launchPasses(tl, at(2), at(8)); got != 2 {
		t.Errorf("passes in [2 s, 8 s]: got %d, want 2", got)
	}
	if got := launchPasses(tl, at(10), at(11)); got != 0 {
		t.Errorf("passes with no NodeClaim: got %d, want 0", got)
	}
}

func TestNoneJoiningAndLastJoined(t *testing.T) {
	t0 := time.Now()
	tl := newTimeline()
	tl.Claims["joined"] = &ClaimTimes{Created: t0, Initialized: t0.Add(30 * time.Second)}
	tl.Claims["refused"] = &ClaimTimes{Created: t0, Deleting: t0.Add(time.Second)}
	tl.Claims["gone"] = &ClaimTimes{Created: t0, Gone: true}
	if !tl.noneJoining() {
		t.Error("a joined, a deleting and a gone NodeClaim: none joining")
	}
	tl.Claims["joining"] = &ClaimTimes{Created: t0, ProviderID: t0.Add(time.Second)}
	if tl.noneJoining() {
		t.Error("a launched NodeClaim not initialized is joining")
	}
	tl.Claims["joining"].Initialized = t0.Add(185 * time.Second)
	if !tl.noneJoining() || !tl.lastJoined().Equal(t0.Add(185*time.Second)) {
		t.Errorf("after the slow join: none joining %v, last joined %v", tl.noneJoining(), tl.lastJoined().Sub(t0))
	}
}
