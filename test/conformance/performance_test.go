package conformance

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestMaximise checks the simplex on programmes whose optimum is known.
func TestMaximise(t *testing.T) {
	// max 3x + 2y s.t. x + y + s1 = 4, x + 3y + s2 = 6 → x = 4, y = 0: 12.
	v, err := maximise([][]float64{{1, 1, 1, 0}, {1, 3, 0, 1}}, []float64{4, 6}, []float64{3, 2, 0, 0})
	if err != nil || math.Abs(v-12) > 1e-9 {
		t.Fatalf("got %v, %v; want 12", v, err)
	}
	// Equalities needing phase one: x + y = 2, x − y = 0, max x → 1.
	v, err = maximise([][]float64{{1, 1}, {1, -1}}, []float64{2, 0}, []float64{1, 0})
	if err != nil || math.Abs(v-1) > 1e-9 {
		t.Fatalf("got %v, %v; want 1", v, err)
	}
	if _, err := maximise([][]float64{{1, 1}}, []float64{-1}, []float64{1, 0}); err == nil {
		t.Fatal("a negative right-hand side was accepted")
	}
	// Infeasible: x = 1 and x = 2.
	if _, err := maximise([][]float64{{1}, {1}}, []float64{1, 2}, []float64{1}); err == nil {
		t.Fatal("an infeasible programme was solved")
	}
}

// TestMaxUtilisation checks the bound on placements worked out by hand from the catalogue.
func TestMaxUtilisation(t *testing.T) {
	// A 28 GiB pod fits only on XL (16 vCPU, 30584176Ki − 100Mi allocatable), alone: 3.5/16.
	b, err := MaxUtilisation([]PodShape{large(10)})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(b.CPU-3.5/16) > 1e-6 {
		t.Errorf("CPU bound of XL-only pods %.4f, want %.4f", b.CPU, 3.5/16)
	}
	// One 0.9 vCPU pod per node: 2XS (4 vCPU) is the best at 22.5 %.
	b, err = MaxUtilisation([]PodShape{apart(small(10))})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(b.CPU-0.9/4) > 1e-6 {
		t.Errorf("CPU bound of one small pod per node %.4f, want 0.225", b.CPU)
	}
	// 7 small pods fill an L's memory (22896304Ki − 100Mi ≥ 7 × 3100Mi) at 6.3/12: the best
	// a node of small pods does, reached exactly with 7k pods.
	b, err = MaxUtilisation([]PodShape{small(70)})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(b.CPU-6.3/12) > 1e-6 {
		t.Errorf("CPU bound of 70 small pods %.4f, want %.4f", b.CPU, 6.3/12)
	}
	if _, err := MaxUtilisation([]PodShape{{Name: "huge", CPU: "1", Memory: "64Gi", Replicas: 1}}); err == nil {
		t.Error("a pod no flavor holds got a bound")
	}
}

// TestOverridesAreScaledBounds: every override moves a threshold that the platform puts out of
// reach (the default is above the computed bound), to the default scaled by that bound.
func TestOverridesAreScaledBounds(t *testing.T) {
	for _, o := range Overrides {
		var p *Phase
		for i := range Phases {
			if Phases[i].Key == o.Key {
				p = &Phases[i]
			}
		}
		if p == nil {
			t.Errorf("override %s/%s: no such phase", o.Key, o.Metric)
			continue
		}
		if o.Metric != "cpu_util" && o.Metric != "memory_util" {
			t.Errorf("override %s/%s: only utilisation has a computed platform bound", o.Key, o.Metric)
			continue
		}
		b, err := MaxUtilisation(p.Pods)
		if err != nil {
			t.Fatalf("%s: %v", o.Key, err)
		}
		bound, def := b.CPU, p.CPUUtil
		if o.Metric == "memory_util" {
			bound, def = b.Memory, p.MemoryUtil
		}
		if def == nil {
			t.Errorf("override %s/%s: the phase does not gate on it", o.Key, o.Metric)
			continue
		}
		if def.Default <= bound {
			t.Errorf("override %s/%s: the default %.3f is reachable (bound %.3f): no platform fact forces it", o.Key, o.Metric, def.Default, bound)
		}
		if want := ScaledThreshold(def.Default, bound); math.Abs(o.Value-want) > 1e-9 {
			t.Errorf("override %s/%s = %.2f, want the default %.2f × the bound %.4f = %.2f", o.Key, o.Metric, o.Value, def.Default, bound, want)
		}
		if !strings.HasPrefix(o.Reason, fmt.Sprintf("%.2f × bound %.3f", def.Default, bound)) {
			t.Errorf("override %s/%s: the reason %q does not start with the default and the bound (%.2f × bound %.3f)", o.Key, o.Metric, o.Reason, def.Default, bound)
		}
		t.Logf("%s %s: default %.2f, bound %.4f (memory %.4f), override %.2f", o.Key, o.Metric, def.Default, b.CPU, b.Memory, o.Value)
	}
	// And every default still in force is reachable.
	for _, p := range Phases {
		if len(p.Pods) == 0 {
			continue
		}
		b, err := MaxUtilisation(p.Pods)
		if err != nil {
			t.Fatal(err)
		}
		for metric, pair := range map[string][2]any{"cpu_util": {p.CPUUtil, b.CPU}, "memory_util": {p.MemoryUtil, b.Memory}} {
			l, bound := pair[0].(*Limit), pair[1].(float64)
			if _, over := overrideFor(p.Key, metric); l != nil && !over && l.Default >= bound {
				t.Errorf("%s %s: default %.2f is above the bound %.3f and has no override", p.Key, metric, l.Default, bound)
			}
		}
	}
}

// TestPhasesMatchTheSuite reads the suite's source at the pinned version and checks that
// Phases lists every threshold call with its default, and no other.
func TestPhasesMatchTheSuite(t *testing.T) {
	// go mod download fetches the module on a fresh machine and says where it is.
	dir, err := KarpenterModuleDir(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "test", "suites", "performance", "*_test.go"))
	if len(files) == 0 {
		t.Fatal("no performance suite files")
	}
	call := regexp.MustCompile(`(TotalTime|CPUUtil|MemoryUtil|Heap|CPU)Threshold\("([^"]+)", ([^)]+)\)`)
	metric := map[string]string{"TotalTime": "total_time_minutes", "CPUUtil": "cpu_util", "MemoryUtil": "memory_util", "Heap": "heap_mb", "CPU": "cpu_cores"}
	seen := map[string]float64{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			v, err := parseDefault(m[3])
			if err != nil {
				t.Fatalf("%s: %s: %v", filepath.Base(f), m[0], err)
			}
			seen[m[2]+" "+metric[m[1]]] = v
		}
	}
	ours := map[string]float64{}
	for _, p := range Phases {
		for m, l := range map[string]*Limit{"total_time_minutes": p.TotalTimeMinutes, "cpu_util": p.CPUUtil, "memory_util": p.MemoryUtil, "heap_mb": p.HeapMB, "cpu_cores": p.CPUCores} {
			if l != nil {
				ours[p.Key+" "+m] = l.Default
			}
		}
	}
	for k, v := range seen {
		if got, ok := ours[k]; !ok || math.Abs(got-v) > 1e-9 {
			t.Errorf("suite gates %s at %v; Phases has %v (present %v)", k, v, got, ok)
		}
	}
	for k := range ours {
		if _, ok := seen[k]; !ok {
			t.Errorf("Phases has %s, which the suite does not gate", k)
		}
	}
}

// parseDefault reads a default as the suite writes it: 0.53, 120, 2*time.Minute.
func parseDefault(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if n, ok := strings.CutSuffix(s, "*time.Minute"); ok {
		v, err := strconv.ParseFloat(n, 64)
		return v, err
	}
	if s == "time.Minute" {
		return 1, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("unknown default %q", s)
	}
	return v, nil
}

// TestExplorationLiftsOnlyMachineLimitsAndStillJudges checks that an exploration run lifts
// each phase's time, heap and CPU limits, keeps the committed utilisation overrides, and that
// its report still judges a figure against the suite's default.
func TestExplorationLiftsOnlyMachineLimitsAndStillJudges(t *testing.T) {
	var table map[string]map[string]float64
	if err := json.Unmarshal([]byte(ThresholdsJSON(true)), &table); err != nil {
		t.Fatal(err)
	}
	for _, p := range Phases {
		for metric, v := range Lifted {
			if table[p.Key][metric] != v {
				t.Errorf("%s %s = %v, want it lifted to %v", p.Key, metric, table[p.Key][metric], v)
			}
		}
	}
	for _, o := range Overrides {
		if table[o.Key][o.Metric] != o.Value {
			t.Errorf("%s %s = %v, want the committed override %v", o.Key, o.Metric, table[o.Key][o.Metric], o.Value)
		}
	}
	if strings.Contains(ThresholdsJSON(false), "heap_mb") || strings.Contains(ThresholdsJSON(false), "total_time_minutes") {
		t.Errorf("a conformance run moves a time or heap limit: %s", ThresholdsJSON(false))
	}

	// A scale-out 3 minutes long with a 200 MB heap: over basic's defaults, whatever ran.
	dir := t.TempDir()
	data, _ := json.Marshal(map[string]any{"total_time": 3 * 60e9, "karpenter_p95_heap_mb": 200.0, "total_reserved_cpu_utilization": 0.2,
		"total_reserved_memory_utilization": 0.9, "karpenter_avg_cpu_cores": 0.4})
	if err := os.WriteFile(filepath.Join(dir, "scale_out_performance_report.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	phases, err := ReadPhases(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := &PerformanceReport{Report: &Report{}, Phases: phases, Explore: true}
	if got := r.Misses(); got != 2 {
		t.Errorf("misses = %d, want 2 (time and heap over basic's defaults)", got)
	}
	if r.File() != "performance-explore" || !strings.Contains(r.Markdown(), "An exploration, not a conformance run") {
		t.Errorf("an exploration's report is not marked as one: file %s", r.File())
	}
}

// A run with a setting changed (PERF_ENV) says what it set and never overwrites the as-shipped
// run's report.
func TestPerformanceReportWithControllerEnv(t *testing.T) {
	r := &PerformanceReport{Report: &Report{}}
	if r.File() != "performance" {
		t.Fatalf("an as-shipped run's report is %s", r.File())
	}
	r.ControllerEnv = map[string]string{"COST_STEERING": "false", "A": "1"}
	if r.File() != "performance-env" {
		t.Errorf("a run with PERF_ENV writes %s, over the as-shipped report's name", r.File())
	}
	if md := r.Markdown(); !strings.Contains(md, "(`PERF_ENV`): `A=1`, `COST_STEERING=false`") {
		t.Errorf("the report does not list what the run set:\n%s", md)
	}
}
