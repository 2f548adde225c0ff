// Package bench measures the provider on the simulated CKE (test/harness): provisioning
// latency step by step, the controller's CPU, memory and apiserver requests, and the cost of
// the fleet it buys against a lower bound. `make bench` runs every scenario and writes
// docs/bench/REPORT.md and docs/bench/report.json; `make bench-smoke` (and plain `go test`)
// runs one tiny scenario to prove the harness works.
package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Bench is one run: the shared harness Env, the metrics sampler and the results so far.
type Bench struct {
	Env     *harness.Env
	Sampler *Sampler
	Report  *Report
	// Out, when set, receives the report after every scenario, so that an interrupted run
	// still leaves what it measured.
	Out string
}

// Lifted is the quota the scenarios that are not about quota run with: out of the way.
const Lifted = 100000

// LiftQuota sets the simulated organisation quota out of the way (RestoreOperator at the
// scenario's cleanup puts CKE's 40 / 40 back).
func (b *Bench) LiftQuota() {
	b.Env.Cluster.Operator().Configure(func(o *operator.Options) { o.QuotaCPU, o.QuotaRAMGB = Lifted, Lifted })
}

// Window is one measured stretch of a scenario: a timeline of its objects, the controller's
// footprint and the apiserver requests of the controller's identity.
type Window struct {
	b        *Bench
	s        *harness.Scenario
	TL       *Timeline
	Start    time.Time
	audit    *harness.AuditReader
	cancel   context.CancelFunc
	accept   time.Duration
	boot     time.Duration
	teardown time.Duration
}

// Open starts a window on scenario s: watches running and audit log read from now.
func (b *Bench) Open(s *harness.Scenario) *Window {
	ctx, cancel := context.WithCancel(context.Background())
	o := b.Env.Cluster.Operator().Options()
	w := &Window{b: b, s: s, TL: newTimeline(), cancel: cancel, accept: o.DecisionDelay, boot: o.JoinDelay - o.DecisionDelay, teardown: o.TeardownDelay}
	w.audit = harness.NewAuditReader(b.Env.Cluster.AuditLogPath())
	w.TL.Watch(ctx, b.Env.Client, s.Namespace)
	w.Start = time.Now()
	return w
}

// Result is one scenario's figures.
type Result struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Pods        int     `json:"pods"`
	WallSeconds float64 `json:"wallSeconds"`
	SimDelays   struct {
		AcceptSeconds   float64 `json:"acceptSeconds"`
		BootSeconds     float64 `json:"bootSeconds"`
		TeardownSeconds float64 `json:"teardownSeconds"`
	} `json:"simulatorDelays"`
	// Steps: per pod that needed a new node, the time of each step (see StepNames).
	Steps map[string]Stat `json:"steps,omitempty"`
	// PendingToRunning: every pod, from creation to Running and Ready.
	PendingToRunning Stat `json:"pendingToRunning"`
	// Overhead: per pod that needed a new node, pending → Running minus the simulator's
	// acceptance and boot delays.
	Overhead      Stat                   `json:"providerOverhead"`
	PodsOnNewNode int                    `json:"podsOnNewNode"`
	PodsRunning   int                    `json:"podsRunning"`
	Claims        int                    `json:"nodeClaimsCreated"`
	Groups        int                    `json:"nodeGroupsCreated"`
	Rejected      int                    `json:"nodeGroupsRejected"`
	Footprint     Footprint              `json:"controller"`
	Requests      []harness.RequestCount `json:"apiserverRequests"`
	RequestsTotal int                    `json:"apiserverRequestsTotal"`
	Cost          *Cost                  `json:"cost,omitempty"`
	Figures       map[string]float64     `json:"figures,omitempty"`
	Notes         []string               `json:"notes,omitempty"`
	Misses        []string               `json:"misses,omitempty"`
	ErrorLines    int                    `json:"controllerErrorLines"`
	Env           map[string]string      `json:"controllerEnvOverrides,omitempty"`
	Raw           map[string][]float64   `json:"raw,omitempty"`
	Extra         map[string]any         `json:"extra,omitempty"`
}

// Cost is the fleet bought for the scenario's pods against the lower bound.
type Cost struct {
	FleetHourly float64        `json:"fleetHourly"`
	Fleet       map[string]int `json:"fleet"`
	Bound       Bound          `json:"bound"`
	// Ratio is FleetHourly / Bound.CostHourly.
	Ratio        float64 `json:"ratio"`
	DemandCPU    string  `json:"demandCPU"`
	DemandMemory string  `json:"demandMemory"`
}

// StepNames are the provisioning steps, in order.
var StepNames = []string{
	"pending→nodeclaim", "nodeclaim→nodegroup", "nodegroup→accepted",
	"accepted→node joined", "node joined→registered", "registered→pod running",
}

// Close ends the window and computes the result.
func (w *Window) Close(name, description string) *Result {
	end := time.Now()
	w.cancel()
	r := &Result{Name: name, Description: description, WallSeconds: round3(end.Sub(w.Start).Seconds()), Figures: map[string]float64{}}
	r.SimDelays.AcceptSeconds = w.accept.Seconds()
	r.SimDelays.BootSeconds = w.boot.Seconds()
	r.SimDelays.TeardownSeconds = w.teardown.Seconds()
	w.TL.Read(func(tl *Timeline) { w.steps(tl, r) })
	r.Footprint = w.b.Sampler.footprint(w.Start, end)
	if evs, err := w.audit.Read(); err == nil {
		r.Requests = harness.CountRequests(evs, harness.ServiceAccountUser)
		for _, c := range r.Requests {
			r.RequestsTotal += c.Count
		}
	} else {
		r.Notes = append(r.Notes, "audit log unreadable: "+err.Error())
	}
	r.ErrorLines = len(w.s.ErrorLines())
	return r
}

func secs(a, b time.Time) float64 { return b.Sub(a).Seconds() }

func (w *Window) steps(tl *Timeline, r *Result) {
	cols := map[string][]float64{}
	var e2e, overhead []float64
	for _, c := range tl.Claims {
		if !c.Created.Before(w.Start) {
			r.Claims++
		}
	}
	for _, g := range tl.Groups {
		if g.Managed && !g.Created.Before(w.Start) {
			r.Groups++
			if !g.Rejected.IsZero() {
				r.Rejected++
			}
		}
	}
	for _, p := range tl.Pods {
		r.Pods++
		if p.Running.IsZero() || p.Created.Before(w.Start) {
			continue
		}
		r.PodsRunning++
		e2e = append(e2e, secs(p.Created, p.Running))
		n := tl.Nodes[p.Node]
		if n == nil || n.Group == "" {
			continue
		}
		g, c := tl.Groups[n.Group], tl.Claims[n.Group]
		if g == nil || c == nil || c.Created.Before(p.Created) || g.Accepted.IsZero() || n.Registered.IsZero() {
			continue // served by capacity that existed or was on its way before the pod
		}
		r.PodsOnNewNode++
		d := []float64{
			secs(p.Created, c.Created), secs(c.Created, g.Created), secs(g.Created, g.Accepted),
			secs(g.Accepted, n.Created), secs(n.Created, n.Registered), secs(n.Registered, p.Running),
		}
		for i, name := range StepNames {
			cols[name] = append(cols[name], d[i])
		}
		overhead = append(overhead, secs(p.Created, p.Running)-w.accept.Seconds()-w.boot.Seconds())
	}
	r.PendingToRunning = stat(e2e)
	r.Overhead = stat(overhead)
	if len(cols) > 0 {
		r.Steps = map[string]Stat{}
		for k, v := range cols {
			r.Steps[k] = stat(v)
		}
	}
}

// Catalogue is the flavors with the allocatable the simulated nodes report and the prices
// the controller uses (its karpenter_clevercloud_catalog_flavor_price_hourly gauge).
func (b *Bench) Catalogue() ([]FlavorCost, error) {
	fams, err := b.Env.Controller().Metrics()
	if err != nil {
		return nil, err
	}
	var out []FlavorCost
	for _, f := range cke.Flavors() {
		_, alloc := cke.Resources(f)
		price := harness.Sum(fams, "karpenter_clevercloud_catalog_flavor_price_hourly", map[string]string{"flavor": f.Name})
		if price == 0 {
			return nil, fmt.Errorf("no price for flavor %s in the controller's metrics", f.Name)
		}
		out = append(out, FlavorCost{
			Name: f.Name, CPUMilli: alloc.Cpu().MilliValue(), MemoryBytes: alloc.Memory().Value(),
			Pods: alloc.Pods().Value(), PriceHourly: price,
		})
	}
	return out, nil
}

// FleetCost prices the live (not deleting) managed NodeGroups and bounds the cost of the
// given pods' summed requests.
func (b *Bench) FleetCost(tl *Timeline, pods []corev1.Pod) (*Cost, error) {
	cat, err := b.Catalogue()
	if err != nil {
		return nil, err
	}
	price := map[string]float64{}
	for _, f := range cat {
		price[f.Name] = f.PriceHourly
	}
	c := &Cost{Fleet: map[string]int{}}
	tl.Read(func(tl *Timeline) {
		for _, g := range tl.Groups {
			if g.Managed && !g.Gone && g.Deleting.IsZero() && !g.Accepted.IsZero() {
				c.Fleet[g.Flavor]++
				c.FleetHourly += price[g.Flavor]
			}
		}
	})
	var cpu, mem resource.Quantity
	for _, p := range pods {
		for _, ctr := range p.Spec.Containers {
			cpu.Add(*ctr.Resources.Requests.Cpu())
			mem.Add(*ctr.Resources.Requests.Memory())
		}
	}
	c.DemandCPU, c.DemandMemory = cpu.String(), mem.String()
	c.Bound = LowerBound(cat, cpu.MilliValue(), mem.Value(), int64(len(pods)))
	c.FleetHourly = round4(c.FleetHourly)
	c.Bound.CostHourly = round4(c.Bound.CostHourly)
	if c.Bound.CostHourly > 0 {
		c.Ratio = round3(c.FleetHourly / c.Bound.CostHourly)
	}
	return c, nil
}

func round4(x float64) float64 { return float64(int64(x*10000+0.5)) / 10000 }

// Report is everything the bench writes.
type Report struct {
	Machine   Machine           `json:"machine"`
	Simulator map[string]string `json:"simulator"`
	Results   []*Result         `json:"scenarios"`
	Verdicts  map[string]string `json:"verdicts,omitempty"`
	HotPaths  []HotPath         `json:"hotPaths,omitempty"`
	Budgets   map[string]string `json:"budgets,omitempty"`
}

// HotPath is one Go benchmark of a path Karpenter calls on every scheduling loop.
type HotPath struct {
	Name        string  `json:"name"`
	N           int     `json:"iterations"`
	NsPerOp     float64 `json:"nsPerOp"`
	BytesPerOp  int64   `json:"bytesPerOp"`
	AllocsPerOp int64   `json:"allocsPerOp"`
}

// Add appends a result and logs its headline.
func (b *Bench) Add(t *testing.T, r *Result) {
	b.Report.Results = append(b.Report.Results, r)
	if b.Out != "" {
		b.write(t, b.Out)
	}
	t.Logf("%s: %d pods, %d running, pending→running p50 %.2fs p95 %.2fs, overhead p50 %.2fs, CPU %.1fs, peak RSS %.0f MB, %d requests",
		r.Name, r.Pods, r.PodsRunning, r.PendingToRunning.P50, r.PendingToRunning.P95, r.Overhead.P50, r.Footprint.CPUSeconds, r.Footprint.PeakRSSMB, r.RequestsTotal)
}

// write stamps the machine's end state on the report and writes it to dir.
func (b *Bench) write(t testing.TB, dir string) {
	t.Helper()
	b.Report.Machine.LoadEnd = loadAvg()
	b.Report.Machine.WallSeconds = time.Since(b.Report.Machine.Started).Round(time.Second).Seconds()
	if err := b.Report.Write(dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("report written to %s", dir)
}

// envInt reads an integer knob with a default.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// envDuration reads a duration knob with a default.
func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
