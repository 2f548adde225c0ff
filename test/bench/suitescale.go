//go:build bench

package bench

import (
	"fmt"
	"testing"
	"time"
)

// SuiteShapes are the pods of Karpenter core's performance suite (basic scale-out): half
// 0.9 vCPU / 3100 MiB, half 3.5 vCPU / 28 GiB. A 28 GiB pod fits only an XL node, alone, so 1000
// of them make a fleet of about 570 nodes: one NodeGroup each.
var SuiteShapes = []Shape{{"suite-small", 0, "900m", "3100Mi"}, {"suite-large", 0, "3500m", "28Gi"}}

// suiteScale runs the performance suite's basic scale-out on the bench's profile, pods created
// at once, and holds it to the suite's own defaults for that phase (total time under 2
// minutes, controller heap p95 under 120 MB, average CPU under 0.5 cores): the figures a user
// would see on CKE's measured timings beside the ones make performance reports on the fast
// profile (docs/conformance/performance.md). BENCH_SUITE_PODS (1000) and BENCH_SUITE_TIMEOUT
// (15m, the suite's own) change its size and patience.
func (b *Bench) suiteScale(t *testing.T, profile string) {
	n := envInt("BENCH_SUITE_PODS", 1000)
	timeout := envDuration("BENCH_SUITE_TIMEOUT", 15*time.Minute)
	name := fmt.Sprintf("suite-scale-%d", n)
	var r *Result
	t.Run("suite-scale", func(t *testing.T) { r = b.SuiteScale(t, name, n, timeout) })

	total := fmt.Sprintf("[%s] performance suite's basic scale-out, %d pods: every pod Running after the first was created", profile, n)
	heap := fmt.Sprintf("[%s] performance suite's basic scale-out, %d pods: controller heap p95", profile, n)
	cpu := fmt.Sprintf("[%s] performance suite's basic scale-out, %d pods: controller average CPU", profile, n)
	maxTotal := b.Threshold("suiteScale.totalSeconds", 120)
	maxHeap := b.Threshold("suiteScale.heapP95MB", 120)
	maxCores := b.Threshold("suiteScale.averageCores", 0.5)
	totalTarget := fmt.Sprintf("< %g s (the suite's basic/scaleOut default)", maxTotal)
	heapTarget := fmt.Sprintf("< %g MB (the suite's default)", maxHeap)
	cpuTarget := fmt.Sprintf("< %g cores (the suite's default)", maxCores)
	if r == nil {
		for m, tg := range map[string]string{total: totalTarget, heap: heapTarget, cpu: cpuTarget} {
			b.Unmeasured(m, tg, name, "the scenario failed")
		}
		return
	}
	all := r.Figures["firstPodToAllRunningSeconds"]
	b.Check(total, totalTarget, r.Name, fmt.Sprintf("%.1f s (every pod bound %.1f s, last NodeClaim %.1f s, %g nodes)",
		all, r.Figures["firstPodToAllBoundSeconds"], r.Figures["firstPodToLastNodeClaimSeconds"], r.Figures["nodes"]),
		len(r.Misses) == 0 && all > 0 && all < maxTotal)
	b.Check(heap, heapTarget, r.Name, fmt.Sprintf("%.1f MB (peak %.1f MB)", r.Footprint.P95HeapMB, r.Footprint.PeakHeapMB), r.Footprint.P95HeapMB < maxHeap)
	b.Check(cpu, cpuTarget, r.Name, fmt.Sprintf("%.3f cores over %.0f s (%.1f CPU s)", r.Footprint.AvgCores, r.WallSeconds, r.Footprint.CPUSeconds), r.Footprint.AvgCores < maxCores)
}

// SuiteScale creates n pods cycling SuiteShapes at once, quota lifted, on the controller of
// the previous scenario, and waits for all to run.
func (b *Bench) SuiteScale(t *testing.T, name string, n int, timeout time.Duration) *Result {
	s, pool := b.setup(t, 10*time.Minute)
	b.LiftQuota()
	w := b.Open(s)
	if err := b.CreatePods(s, pool.Name, n, SuiteShapes); err != nil {
		t.Fatal(err)
	}
	ok := w.TL.WaitFor(s.Ctx, timeout, running(n))
	r := w.Close(name, fmt.Sprintf("%d bare pods of Karpenter core's performance suite (cycling 900m/3100Mi and 3500m/28Gi) created at once by 16 workers, quota lifted", n))
	r.Notes = append(r.Notes, "the controller process of the previous scenario, not restarted")
	w.TL.Read(func(tl *Timeline) {
		var first, lastClaim, lastBound, lastRunning time.Time
		for _, p := range tl.Pods {
			if first.IsZero() || p.Created.Before(first) {
				first = p.Created
			}
			lastBound, lastRunning = later(lastBound, p.Bound), later(lastRunning, p.Running)
		}
		for _, c := range tl.Claims {
			lastClaim = later(lastClaim, c.Created)
		}
		r.Figures["nodes"] = float64(len(tl.Claims))
		if !first.IsZero() {
			r.Figures["firstPodToLastNodeClaimSeconds"] = round3(lastClaim.Sub(first).Seconds())
			r.Figures["firstPodToAllBoundSeconds"] = round3(lastBound.Sub(first).Seconds())
			r.Figures["firstPodToAllRunningSeconds"] = round3(lastRunning.Sub(first).Seconds())
		}
		if !ok {
			_, up := countRunning(tl)
			r.Misses = append(r.Misses, fmt.Sprintf("only %d of %d pods Running within %s", up, n, timeout))
		}
	})
	b.cost(t, w, r)
	finish(s, r)
	b.Add(t, r)
	return r
}
