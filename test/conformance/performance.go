package conformance

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// PerformanceSuite is core's performance suite (test/suites/performance): scale-out of 500 to
// 2000 pods over hundreds of nodes, then consolidation or drift, each phase gated on its total
// time, the nodes' reserved utilisation and the controller's heap and CPU. `make performance`
// runs it on its own cluster; it is not one of Suites (make conformance) and not in make test.
const PerformanceSuite = "performance"

// PerformanceEnv is what the performance suite's controller runs with beyond the bundle's
// environment. The organisation quota is configured at the limit the simulator lifts it to, as
// docs/quota.md tells an organisation with a raised quota to: unconfigured, every launch beyond
// CKE's default 40 vCPU / 40 GB is a probe that flies alone, and hundreds of launches queue
// behind one verdict at a time (the bench's scale-as-shipped scenario measures that, not the
// suite). Profiling is on so the suite's profiler can save the heap and CPU profiles it takes
// at each phase's peak (karpenter_*_profile_*.pb.gz in the work folder); it only serves
// /debug/pprof on the metrics port.
var PerformanceEnv = map[string]string{
	"CLEVER_CLOUD_QUOTA_CPU":       fmt.Sprint(QuotaLifted),
	"CLEVER_CLOUD_QUOTA_MEMORY_GB": fmt.Sprint(QuotaLifted),
	"ENABLE_PROFILING":             "true",
}

// Limit is one of a phase's thresholds: the suite's default, and the override in force.
type Limit struct {
	// Default is the value inline in the suite's code.
	Default float64 `json:"default"`
	// Override is the value KARPENTER_PERF_THRESHOLDS gives, if any (Overrides).
	Override *float64 `json:"override,omitempty"`
}

// In force is the override if any, the default otherwise.
func (l Limit) InForce() float64 {
	if l.Override != nil {
		return *l.Override
	}
	return l.Default
}

// Phase is one measured phase of a performance test, as its code gates it. A nil limit is
// one the phase does not assert.
type Phase struct {
	// Key is the suite's KARPENTER_PERF_THRESHOLDS key, "<test>/<phase>".
	Key string `json:"key"`
	// Spec is the test's It text; Prefix the file prefix of its report
	// (<prefix>_performance_report.json under OUTPUT_DIR).
	Spec   string `json:"spec"`
	Prefix string `json:"prefix"`
	// TotalTimeMinutes, HeapMB and CPUCores are upper bounds; CPUUtil and MemoryUtil lower.
	TotalTimeMinutes *Limit `json:"total_time_minutes,omitempty"`
	CPUUtil          *Limit `json:"cpu_util,omitempty"`
	MemoryUtil       *Limit `json:"memory_util,omitempty"`
	HeapMB           *Limit `json:"heap_mb,omitempty"`
	CPUCores         *Limit `json:"cpu_cores,omitempty"`
	// Pods are the phase's pods at its end, for the utilisation bound.
	Pods []PodShape `json:"pods,omitempty"`
}

func lim(v float64) *Limit { return &Limit{Default: v} }

// Pod shapes of the suite's deployments (test.CreateDeploymentOptions calls).
func small(n int) PodShape {
	return PodShape{Name: "small-resource-app", CPU: "900m", Memory: "3100Mi", Replicas: n}
}
func large(n int) PodShape {
	return PodShape{Name: "large-resource-app", CPU: "3500m", Memory: "28Gi", Replicas: n}
}
func shield(n int) PodShape {
	return PodShape{Name: "do-not-disrupt-app", CPU: "900m", Memory: "450Mi", Replicas: n}
}
func apart(s PodShape) PodShape {
	s.OnePerNode = true
	return s
}

const (
	specBasic        = "Performance Basic Deployment should efficiently scale two deployments with different resource profiles"
	specDoNotDisrupt = "Performance Do Not Disrupt Performance Test should efficiently scale three deployments and test disruption protection"
	specDrift        = "Performance Drift Performance should efficiently handle drift replacement of pods with topology constraints"
	specSpread       = "Performance Host Name Spreading Deployment Reg should efficiently scale two deployments with host name topology spreading"
	specSpreadXL     = "Performance Host Name Spreading Deployment XL should efficiently scale two deployments with host name topology spreading at XL scale"
	specInterference = "Performance Self Anti-Affinity Deployment Interference should efficiently scale two deployments with self anti-affinity"
	specWide         = "Performance Wide Deployments should efficiently scale 30 deployments with varied resources and topology constraints"
)

// Phases are every gated phase of the suite at KarpenterVersion, with the defaults inline in
// its code; TestPhasesMatchTheSuite checks them against the suite's source.
var Phases = []Phase{
	{Key: "basic/scaleOut", Spec: specBasic, Prefix: "scale_out", TotalTimeMinutes: lim(2), CPUUtil: lim(0.53), MemoryUtil: lim(0.65), HeapMB: lim(120), CPUCores: lim(0.50),
		Pods: []PodShape{small(500), large(500)}},
	{Key: "basic/consolidation", Spec: specBasic, Prefix: "consolidation", TotalTimeMinutes: lim(20), HeapMB: lim(140), CPUCores: lim(0.25)},
	{Key: "doNotDisrupt/scaleOut", Spec: specDoNotDisrupt, Prefix: "do_not_disrupt_scale_out", TotalTimeMinutes: lim(4), CPUUtil: lim(0.38), MemoryUtil: lim(0.40), HeapMB: lim(340), CPUCores: lim(1.10),
		Pods: []PodShape{small(500), large(500), shield(100)}},
	{Key: "doNotDisrupt/consolidation", Spec: specDoNotDisrupt, Prefix: "do_not_disrupt_consolidation", TotalTimeMinutes: lim(35), CPUUtil: lim(0.38), MemoryUtil: lim(0.40), HeapMB: lim(320), CPUCores: lim(0.80),
		Pods: []PodShape{small(250), large(250), shield(100)}},
	{Key: "drift/initial", Spec: specDrift, Prefix: "drift_initial_deployment", TotalTimeMinutes: lim(5), HeapMB: lim(190), CPUCores: lim(0.70)},
	{Key: "drift/drift", Spec: specDrift, Prefix: "drift_execution", TotalTimeMinutes: lim(50), HeapMB: lim(250), CPUCores: lim(1.05)},
	{Key: "hostNameSpreading/scaleOut", Spec: specSpread, Prefix: "hostname_spread_scale_out", TotalTimeMinutes: lim(5), CPUUtil: lim(0.38), MemoryUtil: lim(0.40), HeapMB: lim(360), CPUCores: lim(1.15),
		Pods: []PodShape{small(500), large(500)}},
	{Key: "hostNameSpreading/consolidation", Spec: specSpread, Prefix: "hostname_spread_consolidation", CPUUtil: lim(0.38), MemoryUtil: lim(0.40), HeapMB: lim(350), CPUCores: lim(1.00),
		Pods: []PodShape{small(350), large(350)}},
	{Key: "hostNameSpreadingXL/scaleOut", Spec: specSpreadXL, Prefix: "hostname_spread_xl_scale_out", TotalTimeMinutes: lim(35), CPUUtil: lim(0.38), MemoryUtil: lim(0.40), HeapMB: lim(720), CPUCores: lim(1.40),
		Pods: []PodShape{small(1000), large(1000)}},
	{Key: "hostNameSpreadingXL/consolidation", Spec: specSpreadXL, Prefix: "hostname_spread_xl_consolidation", TotalTimeMinutes: lim(35), CPUUtil: lim(0.38), MemoryUtil: lim(0.40), HeapMB: lim(730), CPUCores: lim(1.70),
		Pods: []PodShape{small(700), large(700)}},
	{Key: "interference/scaleOut", Spec: specInterference, Prefix: "self_antiaffinity_scale_out_small", TotalTimeMinutes: lim(5), CPUUtil: lim(0.38), MemoryUtil: lim(0.40), HeapMB: lim(310), CPUCores: lim(0.90),
		Pods: []PodShape{apart(small(500))}},
	{Key: "interference/interference", Spec: specInterference, Prefix: "self_antiaffinity_interference", TotalTimeMinutes: lim(10), CPUUtil: lim(0.38), MemoryUtil: lim(0.40), HeapMB: lim(590), CPUCores: lim(1.30),
		Pods: []PodShape{apart(small(250)), apart(large(500))}},
	{Key: "interference/consolidation", Spec: specInterference, Prefix: "self_antiaffinity_interference_consolidation", TotalTimeMinutes: lim(25), CPUUtil: lim(0.38), MemoryUtil: lim(0.40), HeapMB: lim(540), CPUCores: lim(0.80),
		Pods: []PodShape{apart(small(400)), apart(large(200))}},
	// Skipped on CKE (Skips): 270 of its pods ask 30 to 64 GiB, more than any flavor has.
	{Key: "wideDeployments/scaleOut", Spec: specWide, Prefix: "wide_deployments_scale_out", TotalTimeMinutes: lim(5), CPUUtil: lim(0.2), MemoryUtil: lim(0.20), HeapMB: lim(150), CPUCores: lim(0.70)},
	{Key: "wideDeployments/consolidation", Spec: specWide, Prefix: "wide_deployments_consolidation", TotalTimeMinutes: lim(40), CPUUtil: lim(0.20), MemoryUtil: lim(0.20), HeapMB: lim(210), CPUCores: lim(0.30)},
}

// suiteReport is the part of the suite's <prefix>_performance_report.json the report reads
// (PerformanceReport in the suite; durations in nanoseconds).
type suiteReport struct {
	TestName             string        `json:"test_name"`
	TestType             string        `json:"test_type"`
	TotalPods            int           `json:"total_pods"`
	TotalNodes           int           `json:"total_nodes"`
	TotalTime            time.Duration `json:"total_time"`
	PodsNetChange        int           `json:"change_in_pod_count"`
	NodesNetChange       int           `json:"change_in_node_count"`
	PodsDisrupted        int           `json:"pods_disrupted"`
	CPUUtil              float64       `json:"total_reserved_cpu_utilization"`
	MemoryUtil           float64       `json:"total_reserved_memory_utilization"`
	EfficiencyScore      float64       `json:"resource_efficiency_score"`
	PodsPerNode          float64       `json:"pods_per_node"`
	Rounds               int           `json:"rounds"`
	KarpenterP95MemoryMB float64       `json:"karpenter_p95_memory_mb"`
	KarpenterMaxMemoryMB float64       `json:"karpenter_max_memory_mb"`
	KarpenterP95HeapMB   float64       `json:"karpenter_p95_heap_mb"`
	KarpenterMaxHeapMB   float64       `json:"karpenter_max_heap_mb"`
	KarpenterAvgCPUCores float64       `json:"karpenter_avg_cpu_cores"`
	KarpenterP95CPUCores float64       `json:"karpenter_p95_cpu_cores"`
	KarpenterMaxCPUCores float64       `json:"karpenter_max_cpu_cores"`
	MetricsSampleCount   int           `json:"metrics_sample_count"`
}

// Figure is one gated figure of a phase: what was measured against the threshold in force.
type Figure struct {
	Metric   string  `json:"metric"`
	Value    float64 `json:"value"`
	Limit    Limit   `json:"limit"`
	Upper    bool    `json:"upper"`
	Passed   bool    `json:"passed"`
	Bound    float64 `json:"bound,omitempty"`
	Overrode string  `json:"override_reason,omitempty"`
}

// PhaseResult is a phase's figures as the suite reported them; Ran false when the phase
// wrote no report (its test failed earlier or was skipped).
type PhaseResult struct {
	Phase   Phase        `json:"phase"`
	Ran     bool         `json:"ran"`
	Report  *suiteReport `json:"report,omitempty"`
	Figures []Figure     `json:"figures,omitempty"`
	Bound   *Bound       `json:"utilisation_bound,omitempty"`
}

// PerformanceReport is a `make performance` run: the spec outcomes and each phase's figures.
type PerformanceReport struct {
	*Report
	Phases []PhaseResult `json:"phases"`
	// Thresholds is the KARPENTER_PERF_THRESHOLDS the suite ran with.
	Thresholds string `json:"karpenter_perf_thresholds"`
	// Explore is an exploration run: time, heap and CPU limits Lifted so every phase ran.
	Explore bool `json:"explore,omitempty"`
	// Baseline is a run against core's kwok provider in place of ours (baseline.go).
	Baseline bool `json:"baseline,omitempty"`
	// ControllerEnv is what the run set in the controller's environment beyond the bundle's
	// (-env).
	ControllerEnv map[string]string `json:"controller_env,omitempty"`
}

// File is the base name of the run's report: a baseline, an exploration or a run with a
// setting changed (-env) never overwrites the last as-shipped run's.
func (r *PerformanceReport) File() string {
	if r.Baseline {
		return "performance-baseline"
	}
	if r.Explore {
		return "performance-explore"
	}
	if len(r.ControllerEnv) > 0 {
		return "performance-env"
	}
	return "performance"
}

// ReadPhases reads every phase's report from the suite's OUTPUT_DIR.
func ReadPhases(dir string) ([]PhaseResult, error) {
	var out []PhaseResult
	for _, p := range withOverrides(Phases) {
		r := PhaseResult{Phase: p}
		if len(p.Pods) > 0 {
			b, err := MaxUtilisation(p.Pods)
			if err != nil {
				return nil, fmt.Errorf("utilisation bound of %s: %w", p.Key, err)
			}
			r.Bound = &b
		}
		data, err := os.ReadFile(filepath.Join(dir, p.Prefix+"_performance_report.json"))
		switch {
		case os.IsNotExist(err):
			out = append(out, r)
			continue
		case err != nil:
			return nil, fmt.Errorf("reading %s's report: %w", p.Key, err)
		}
		var sr suiteReport
		if err := json.Unmarshal(data, &sr); err != nil {
			return nil, fmt.Errorf("decoding %s's report: %w", p.Key, err)
		}
		r.Ran, r.Report = true, &sr
		add := func(metric string, v float64, l *Limit, upper bool, bound float64) {
			if l == nil {
				return
			}
			f := Figure{Metric: metric, Value: v, Limit: *l, Upper: upper, Bound: bound}
			if upper {
				f.Passed = v < l.InForce()
			} else {
				f.Passed = v > l.InForce()
			}
			if o, ok := overrideFor(p.Key, metric); ok {
				f.Overrode = o.Reason
			}
			r.Figures = append(r.Figures, f)
		}
		var bc, bm float64
		if r.Bound != nil {
			bc, bm = r.Bound.CPU, r.Bound.Memory
		}
		add("total_time_minutes", sr.TotalTime.Minutes(), p.TotalTimeMinutes, true, 0)
		add("cpu_util", sr.CPUUtil, p.CPUUtil, false, bc)
		add("memory_util", sr.MemoryUtil, p.MemoryUtil, false, bm)
		add("heap_mb", sr.KarpenterP95HeapMB, p.HeapMB, true, 0)
		add("cpu_cores", sr.KarpenterAvgCPUCores, p.CPUCores, true, 0)
		out = append(out, r)
	}
	return out, nil
}

// Markdown renders docs/conformance/performance.md.
func (r *PerformanceReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Karpenter core's performance suite on the simulated CKE\n\n")
	fmt.Fprintf(&b, "Karpenter core's `test/suites/performance` (`sigs.k8s.io/karpenter` %s, built from the module, unmodified) against the provider "+
		"on the simulated CKE. Generated by `make performance` (`test/conformance`); do not edit. How it runs and what the figures mean: "+
		"[README.md](README.md#performance-suite).\n\n", r.Karpenter)
	fmt.Fprintf(&b, "- commit: `%s`, started %s, **%s wall**\n", r.Commit, r.Started.UTC().Format(time.RFC3339), time.Duration(r.Seconds*float64(time.Second)).Round(time.Second))
	fmt.Fprintf(&b, "- simulator: %s\n- controller: %s\n", r.Simulator, r.Controller)
	if r.Focus != "" {
		fmt.Fprintf(&b, "- focus: `%s`\n", r.Focus)
	}
	if len(r.ControllerEnv) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(r.ControllerEnv)) {
			kv = append(kv, fmt.Sprintf("`%s=%s`", k, r.ControllerEnv[k]))
		}
		fmt.Fprintf(&b, "- controller environment set for this run (`PERF_ENV`): %s\n", strings.Join(kv, ", "))
	}
	fmt.Fprintf(&b, "- `KARPENTER_PERF_THRESHOLDS`: `%s` (from `test/conformance/perfoverrides.go`, each value with its computed bound and reason below)\n", r.Thresholds)
	t := r.Total()
	result := "result"
	if r.Baseline {
		b.WriteString("\n**A baseline, not this provider**: Karpenter core's kwok provider ran in place of ours (`PERF_BASELINE=1`; " +
			"[README.md](README.md#baseline-core-alone)). Its instance types are CKE's flavors, with the provider's allocatable and prices, so it puts the " +
			"suite's pods on the same nodes; what differs from a CKE run is everything between a NodeClaim and its Node.\n")
	}
	if r.Explore {
		fmt.Fprintf(&b, "\n**An exploration, not a conformance run** (`PERF_EXPLORE=1`): every phase's time, heap and CPU limits were lifted so that "+
			"a test goes on past a missed one and its later phases are measured. A test that passed below only ran to its end; the figures "+
			"are judged against the suite's thresholds as in any run: **%d figure(s) miss them**.\n", r.Misses())
		result = "ran to its end (limits lifted)"
	}
	fmt.Fprintf(&b, "\n**%d passed, %d failed, %d skipped**\n\n", t.Passed, t.Failed, t.Skipped)
	fmt.Fprintf(&b, "| test | %s | wall | note |\n|---|---|---|---|\n", result)
	for _, s := range r.Suites {
		specs := append([]Spec{}, s.Specs...)
		sort.SliceStable(specs, func(i, j int) bool { return specs[i].Text < specs[j].Text })
		for _, sp := range specs {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(sp.Text), sp.State, time.Duration(sp.Seconds*float64(time.Second)).Round(time.Second), cell(sp.Note()))
		}
		for _, p := range s.Problems {
			fmt.Fprintf(&b, "\n> %s\n", oneLine(p))
		}
	}
	b.WriteString("\n## Figures per phase\n\nEach figure the suite gates on, beside its default threshold (`<` an upper bound, `>` a lower one) and the " +
		"override in force, if any. *bound* is the highest node-averaged utilisation any placement of the phase's pods onto CKE's flavors can reach " +
		"(`MaxUtilisation`, from the catalogue).\n")
	for _, pr := range r.Phases {
		fmt.Fprintf(&b, "\n### %s\n\n", pr.Phase.Key)
		if !pr.Ran {
			b.WriteString("No report: the phase did not run (its test was skipped, or failed before it).\n")
			if pr.Bound != nil {
				fmt.Fprintf(&b, "\nUtilisation bound: CPU %.3f, memory %.3f.\n", pr.Bound.CPU, pr.Bound.Memory)
			}
			continue
		}
		sr := pr.Report
		fmt.Fprintf(&b, "%d pods on %d nodes (net %+d pods, %+d nodes), %.1f pods per node, %d pods disrupted, %d round(s), %d metric samples.\n\n",
			sr.TotalPods, sr.TotalNodes, sr.PodsNetChange, sr.NodesNetChange, sr.PodsPerNode, sr.PodsDisrupted, sr.Rounds, sr.MetricsSampleCount)
		b.WriteString("| figure | measured | default | in force | bound | result |\n|---|---|---|---|---|---|\n")
		for _, f := range pr.Figures {
			op := ">"
			if f.Upper {
				op = "<"
			}
			force, bound, res := "default", "", "pass"
			if f.Limit.Override != nil {
				force = fmt.Sprintf("%s %s (override: %s)", op, num(*f.Limit.Override), f.Overrode)
			}
			if f.Bound > 0 {
				bound = num(f.Bound)
			}
			if !f.Passed {
				res = "**fail**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s %s | %s | %s | %s |\n", f.Metric, num(f.Value), op, num(f.Limit.Default), cell(force), bound, res)
		}
		fmt.Fprintf(&b, "\nAlso reported: RSS p95 %.0f MB (max %.0f), heap max %.0f MB, CPU p95 %.2f / max %.2f cores, efficiency score %.1f.\n",
			sr.KarpenterP95MemoryMB, sr.KarpenterMaxMemoryMB, sr.KarpenterMaxHeapMB, sr.KarpenterP95CPUCores, sr.KarpenterMaxCPUCores, sr.EfficiencyScore)
	}
	return b.String()
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// Misses counts the figures over (or under) the suite's thresholds.
func (r *PerformanceReport) Misses() int {
	n := 0
	for _, pr := range r.Phases {
		for _, f := range pr.Figures {
			if !f.Passed {
				n++
			}
		}
	}
	return n
}

// Write writes <File>.json and <File>.md into dir.
func (r *PerformanceReport) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, r.File()+".json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, r.File()+".md"), []byte(r.Markdown()), 0o644)
}
