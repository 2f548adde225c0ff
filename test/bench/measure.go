package bench

import (
	"context"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// Machine describes where the bench ran.
type Machine struct {
	NProc       int        `json:"nproc"`
	MemTotalGiB float64    `json:"memTotalGiB"`
	CPUModel    string     `json:"cpuModel"`
	Kernel      string     `json:"kernel"`
	GoVersion   string     `json:"goVersion"`
	LoadStart   [3]float64 `json:"loadAverageStart"`
	LoadEnd     [3]float64 `json:"loadAverageEnd"`
	Started     time.Time  `json:"started"`
	WallSeconds float64    `json:"wallSeconds"`
}

func describeMachine() Machine {
	m := Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadAvg(), Started: time.Now().UTC()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.MemTotalGiB = math.Round(kb/1024/1024*10) / 10
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func loadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}

// sample is one scrape of the controller's /metrics.
type sample struct {
	at         time.Time
	cpuSeconds float64
	rss, heap  float64
	// schedSum, schedCount: the provisioner's scheduling simulation histogram.
	schedSum, schedCount float64
}

// Sampler scrapes the running controller's /metrics every second.
type Sampler struct {
	env     *stack.Env
	mu      sync.Mutex
	samples []sample
}

func (s *Sampler) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s.scrape()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *Sampler) scrape() {
	c := s.env.Controller()
	if c == nil || !c.Running() {
		return
	}
	fams, err := c.Metrics()
	if err != nil {
		return
	}
	sm := sample{
		at:         time.Now(),
		cpuSeconds: stack.Sum(fams, "process_cpu_seconds_total", nil),
		rss:        stack.Sum(fams, "process_resident_memory_bytes", nil),
		heap:       stack.Sum(fams, "go_memstats_heap_inuse_bytes", nil),
	}
	sm.schedSum, sm.schedCount = histogram(fams, "karpenter_scheduler_scheduling_duration_seconds", map[string]string{"controller": "provisioner"})
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
}

func histogram(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (sum, count float64) {
	f, ok := fams[name]
	if !ok {
		return 0, 0
	}
	for _, m := range f.GetMetric() {
		if m.Histogram == nil {
			continue
		}
		match := true
		for k, v := range labels {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			match = match && found
		}
		if match {
			sum += m.Histogram.GetSampleSum()
			count += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum, count
}

// Footprint is the controller's resource use over a window.
type Footprint struct {
	CPUSeconds float64 `json:"cpuSeconds"`
	AvgCores   float64 `json:"avgCores"`
	PeakRSSMB  float64 `json:"peakRSSMB"`
	PeakHeapMB float64 `json:"peakHeapInuseMB"`
	P95HeapMB  float64 `json:"p95HeapInuseMB"`
	Samples    int     `json:"samples"`
	// SchedulingSimulations and SchedulingSeconds: the provisioner's scheduling simulations
	// (karpenter_scheduler_scheduling_duration_seconds{controller="provisioner"}).
	SchedulingSimulations float64 `json:"schedulingSimulations"`
	SchedulingSeconds     float64 `json:"schedulingSeconds"`
}

// footprint summarises the samples between from and to; counters that go back (a controller
// restart) count from zero again.
func (s *Sampler) footprint(from, to time.Time) Footprint {
	s.scrape()
	s.mu.Lock()
	defer s.mu.Unlock()
	var fp Footprint
	var heaps []float64
	var prev *sample
	// The last sample before the window is the baseline.
	for i := range s.samples {
		sm := &s.samples[i]
		if sm.at.Before(from) {
			prev = sm
			continue
		}
		if sm.at.After(to.Add(time.Second)) {
			break
		}
		fp.Samples++
		fp.PeakRSSMB = math.Max(fp.PeakRSSMB, sm.rss/1e6)
		fp.PeakHeapMB = math.Max(fp.PeakHeapMB, sm.heap/1e6)
		heaps = append(heaps, sm.heap/1e6)
		if prev != nil {
			fp.CPUSeconds += delta(prev.cpuSeconds, sm.cpuSeconds)
			fp.SchedulingSeconds += delta(prev.schedSum, sm.schedSum)
			fp.SchedulingSimulations += delta(prev.schedCount, sm.schedCount)
		}
		prev = sm
	}
	if wall := to.Sub(from).Seconds(); wall > 0 {
		fp.AvgCores = fp.CPUSeconds / wall
	}
	fp.P95HeapMB = percentile(heaps, 0.95)
	return fp
}

func delta(a, b float64) float64 {
	if b >= a {
		return b - a
	}
	return b
}

// percentile is the nearest-rank percentile of xs (0 when empty).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	k := int(math.Ceil(p*float64(len(s)))) - 1
	k = max(0, min(k, len(s)-1))
	return s[k]
}

// Stat is the distribution of one step's duration, in seconds.
type Stat struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	Max float64 `json:"max"`
}

func stat(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	m := xs[0]
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return Stat{N: len(xs), P50: round3(percentile(xs, 0.5)), P95: round3(percentile(xs, 0.95)), Max: round3(m)}
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
