package conformance

import (
	"encoding/json"
	"math"
)

// Override is one KARPENTER_PERF_THRESHOLDS value: the only way the performance suite lets a
// provider move a threshold, so every deviation from its defaults is here, with the platform
// fact that forces it. TestOverridesAreScaledBounds recomputes each from the bound it cites.
type Override struct {
	Key    string
	Metric string // heap_mb, cpu_cores, total_time_minutes, cpu_util or memory_util
	Value  float64
	Reason string
}

// ScaledThreshold is the override of a utilisation threshold CKE's flavors make unreachable:
// the suite's default scaled by the highest utilisation any placement of the phase's pods
// reaches on the catalogue (MaxUtilisation), rounded down to the hundredth. The default is a
// fraction of full nodes, which the suite's pods nearly reach on instance shapes of every
// memory-to-CPU ratio; on CKE's, full nodes are out of reach, and the override asks the same
// fraction of what is reachable. Both factors are facts: the suite's code and the catalogue.
func ScaledThreshold(def, bound float64) float64 {
	return math.Floor(def*bound*100+1e-9) / 100
}

// Overrides are every threshold the run moves. Only reserved CPU utilisation moves: CKE's
// flavors give about 2 GB per vCPU (2XS 4 vCPU / 4 GB … XL 16 vCPU / 32 GB), the suite's pods ask
// up to 8 GB per vCPU (3.5 vCPU / 28 GiB, which only XL holds, alone, at 22 % of its CPU), so no
// placement reaches the default. Each value is ScaledThreshold(default, bound), which
// TestOverridesAreScaledBounds recomputes. Memory utilisation, time, heap and CPU keep their
// defaults.
var Overrides = []Override{
	{Key: "basic/scaleOut", Metric: "cpu_util", Value: 0.13, Reason: "0.53 × bound 0.257: 500 pods of 3.5 vCPU / 28 GiB each fill an XL node's memory at 22 % of its CPU; the 500 of 0.9 vCPU / 3100 MiB reach 52.5 % at best (7 on an L)"},
	{Key: "doNotDisrupt/scaleOut", Metric: "cpu_util", Value: 0.10, Reason: "0.38 × bound 0.284: as basic, the 28 GiB pods hold one XL each at 22 % CPU (33 % with two 450 MiB pods beside them)"},
	{Key: "doNotDisrupt/consolidation", Metric: "cpu_util", Value: 0.11, Reason: "0.38 × bound 0.309: as the scale-out, 250 + 250 + 100 pods"},
	{Key: "hostNameSpreading/scaleOut", Metric: "cpu_util", Value: 0.09, Reason: "0.38 × bound 0.257: the pods of basic (spreading can only lower the bound)"},
	{Key: "hostNameSpreading/consolidation", Metric: "cpu_util", Value: 0.09, Reason: "0.38 × bound 0.257: the pods of basic, 350 + 350"},
	{Key: "hostNameSpreadingXL/scaleOut", Metric: "cpu_util", Value: 0.09, Reason: "0.38 × bound 0.257: the pods of basic, 1000 + 1000"},
	{Key: "hostNameSpreadingXL/consolidation", Metric: "cpu_util", Value: 0.09, Reason: "0.38 × bound 0.257: the pods of basic, 700 + 700"},
	{Key: "interference/scaleOut", Metric: "cpu_util", Value: 0.08, Reason: "0.38 × bound 0.225: one 0.9 vCPU pod per node (anti-affinity) uses at most 22.5 % of the smallest flavor, 2XS (4 vCPU)"},
	{Key: "interference/interference", Metric: "cpu_util", Value: 0.08, Reason: "0.38 × bound 0.221: one pod per node, 0.9 of 4 vCPU (2XS) or 3.5 of 16 (XL, the only flavor a 28 GiB pod fits)"},
	{Key: "interference/consolidation", Metric: "cpu_util", Value: 0.08, Reason: "0.38 × bound 0.223: as the interference phase, 400 + 200 pods"},
}

func overrideFor(key, metric string) (Override, bool) {
	for _, o := range Overrides {
		if o.Key == key && o.Metric == metric {
			return o, true
		}
	}
	return Override{}, false
}

// withOverrides are phases with each Limit's Override set from Overrides.
func withOverrides(phases []Phase) []Phase {
	out := make([]Phase, len(phases))
	for i, p := range phases {
		for metric, l := range map[string]**Limit{
			"total_time_minutes": &p.TotalTimeMinutes, "cpu_util": &p.CPUUtil, "memory_util": &p.MemoryUtil,
			"heap_mb": &p.HeapMB, "cpu_cores": &p.CPUCores,
		} {
			if o, ok := overrideFor(p.Key, metric); ok && *l != nil {
				c := **l
				c.Override = &o.Value
				*l = &c
			}
		}
		out[i] = p
	}
	return out
}

// Lifted is what an exploration run (Config.Explore, PERF_EXPLORE=1) sets every phase's time,
// heap and CPU limits to. The suite stops a test at its first failed assertion, so a scale-out
// over its time or heap limit leaves the test's consolidation or drift phase unmeasured; lifted
// limits let every phase run. The report still judges each figure against the suite's default
// (or the override above), never against these.
var Lifted = map[string]float64{"total_time_minutes": 1e4, "heap_mb": 1e6, "cpu_cores": 1e3}

// ThresholdsJSON is KARPENTER_PERF_THRESHOLDS: {"<key>": {"<metric>": value}}, the suite's
// format; with explore, every phase's time, heap and CPU limits are Lifted.
func ThresholdsJSON(explore bool) string {
	table := map[string]map[string]float64{}
	set := func(key, metric string, v float64) {
		if table[key] == nil {
			table[key] = map[string]float64{}
		}
		table[key][metric] = v
	}
	for _, o := range Overrides {
		set(o.Key, o.Metric, o.Value)
	}
	if explore {
		for _, p := range Phases {
			for metric, v := range Lifted {
				set(p.Key, metric, v)
			}
		}
	}
	// encoding/json sorts map keys: the string is the same from run to run.
	b, _ := json.Marshal(table)
	return string(b)
}
