// Package bench measures the provider on the simulated CKE (sim/stack): provisioning
// latency step by step, the controller's CPU, memory and apiserver requests, and the cost of
// the fleet it buys against a lower bound. `make bench` runs every scenario and writes
// docs/bench/REPORT.md and docs/bench/report.json; `make bench-smoke` (and plain `go test`)
// runs one tiny scenario to prove the harness works. Every scenario runs on the simulator's
// live profile (CKE's measured timings) and the launch-path ones on the fast one too.
package bench

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Bench is one run: the shared stack Env, the metrics sampler and the results so far.
type Bench struct {
	Env     *stack.Env
	Sampler *Sampler
	Report  *Report
	// Out, when set, receives the report after every scenario, so that an interrupted run
	// still leaves what it measured.
	Out string
	// Profile is the simulator profile the scenarios run on now (UseProfile).
	Profile string
	// healthy is, by profile, the launches of the windows whose Creates all succeeded.
	healthy map[string]*healthyLaunches
	// timeouts is, by profile, the acceptance timeouts seen in every window.
	timeouts map[string]float64
	// thresholds are the targets' overrides (ThresholdsEnv).
	thresholds *thresholds
}

// healthyLaunches are launches of windows in which no Create failed: NodeClaim created →
// provider ID and NodeGroup created → decided on the bench's clock, core's Create histogram.
type healthyLaunches struct {
	create           hist
	launch, decision []float64
}

// Profiles are the simulator's timing profiles the bench runs on (sim/README.md): live is
// CKE as measured (decision 1 s, node joined at 28 s, Synced at 38–58 s, teardown 35 s,
// quota-engine quirks on); fast is the same sequence compressed for tests.
var Profiles = map[string]func() sim.Options{"live": sim.LiveOptions, "fast": sim.FastOptions}

// UseProfile makes the simulated operator run profile name from now on: its options become
// the harness's defaults, which every scenario's cleanup restores.
func (b *Bench) UseProfile(name string) {
	mk, ok := Profiles[name]
	if !ok {
		panic(fmt.Sprintf("bench: unknown simulator profile %q", name))
	}
	p := mk().Operator
	p.Log = b.Env.OperatorDefaults.Log
	b.Env.OperatorDefaults = p
	b.Env.RestoreOperator()
	b.Profile = name
	if b.Report.Profiles == nil {
		b.Report.Profiles = map[string]map[string]string{}
	}
	o := b.Env.Cluster.Operator().Options()
	quirks := "off"
	if o.QuotaBatchWindow > 0 || o.LeakedReservationTTL > 0 {
		quirks = fmt.Sprintf("on (batch window %s, leaked reservations %s)", o.QuotaBatchWindow, o.LeakedReservationTTL)
	}
	b.Report.Profiles[name] = map[string]string{
		"decision (from creation)": o.DecisionDelay.String(), "node joined (from creation)": joinStory(o),
		"Synced (from creation)": fmt.Sprintf("%s–%s, %.0f %% after %s", o.SyncDelayMin, o.SyncDelayMax, o.SlowSyncProbability*100, o.SlowSyncDelay),
		"teardown":               o.TeardownDelay.String(), "default quota": fmt.Sprintf("%d vCPU / %d GB", o.QuotaCPU, o.QuotaRAMGB),
		"quota-engine quirks": quirks,
	}
}

// joinStory tells the profile's join: one delay, or the drawn spread with its median and
// its slow outlier.
func joinStory(o operator.Options) string {
	if o.TypicalJoinDelay() == o.JoinDelay {
		return o.JoinDelay.String()
	}
	return fmt.Sprintf("%s–%s, median %s, %.0f %% after %s", o.JoinDelay, o.JoinDelayMax, o.TypicalJoinDelay(), o.SlowJoinProbability*100, o.SlowBootDelay)
}

// Lifted is the quota the scenarios that are not about quota run with: out of the way.
const Lifted = 100000

// LiftQuota sets the simulated organisation quota out of the way (RestoreOperator at the
// scenario's cleanup puts CKE's 40 / 40 back).
func (b *Bench) LiftQuota() {
	b.Env.Cluster.Operator().Configure(func(o *operator.Options) { o.QuotaCPU, o.QuotaRAMGB = Lifted, Lifted })
}

// scenario starts a harness scenario whose cleanup tears the fleet down quickly: what the
// cleanup takes is not measured, and on the live profile each scenario would otherwise wait
// the platform's 35 s teardown once more. (Cleanups run last-registered first, so this runs
// before the harness's own, which restores the profile's options at its end.)
func (b *Bench) scenario(t *testing.T) *harness.Scenario {
	s := harness.NewScenario(t, b.Env)
	t.Cleanup(func() {
		b.Env.Cluster.Operator().Configure(func(o *operator.Options) { o.TeardownDelay = min(o.TeardownDelay, time.Second) })
	})
	return s
}

// Window is one measured stretch of a scenario: a timeline of its objects, the controller's
// footprint, its Create metrics and the apiserver requests of the controller's identity.
type Window struct {
	b      *Bench
	s      *harness.Scenario
	TL     *Timeline
	Start  time.Time
	audit  *harness.AuditReader
	cancel context.CancelFunc
	ops    operator.Options
	before *launchMetrics
	synced *syncedTrace
	// launch and decision: NodeClaim created → provider ID and NodeGroup created → decided,
	// of the window's launches; e2e each pod's pending → Running (filled by Close).
	launch, decision, e2e []float64
	// end is when Close closed the window.
	end time.Time
}

// Open starts a window on scenario s: watches running and audit log read from now.
func (b *Bench) Open(s *harness.Scenario) *Window {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Window{b: b, s: s, TL: newTimeline(), cancel: cancel, ops: b.Env.Cluster.Operator().Options()}
	w.audit = harness.NewAuditReader(b.Env.Cluster.AuditLogPath())
	if err := w.TL.Watch(ctx, b.Env.Client, s.Namespace); err != nil {
		cancel()
		s.T.Fatalf("opening the window: %v", err)
	}
	w.before, _ = scrapeLaunchMetrics(b.Env.Controller())
	w.Start = time.Now()
	return w
}

// TraceSynced samples Karpenter core's karpenter_cluster_state_synced gauge every interval
// until the window closes. Call it right after Open.
func (w *Window) TraceSynced(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	prev := w.cancel
	w.cancel = func() { cancel(); prev() }
	w.synced = traceSynced(ctx, w.b.Env.Controller().MetricsURL, interval)
}

// Result is one scenario's figures.
type Result struct {
	Name        string  `json:"name"`
	Profile     string  `json:"profile"`
	Description string  `json:"description"`
	Pods        int     `json:"pods"`
	WallSeconds float64 `json:"wallSeconds"`
	// SimDelays are the simulated operator's, every one measured from the NodeGroup's creation
	// but the teardown (from its deletion).
	SimDelays struct {
		DecisionSeconds float64 `json:"decisionSeconds"`
		JoinSeconds     float64 `json:"joinSeconds"`
		SyncMinSeconds  float64 `json:"syncMinSeconds"`
		SyncMaxSeconds  float64 `json:"syncMaxSeconds"`
		TeardownSeconds float64 `json:"teardownSeconds"`
	} `json:"simulatorDelays"`
	// Steps: per pod that needed a new node, the time of each step (see StepNames).
	Steps map[string]Stat `json:"steps,omitempty"`
	// PendingToRunning: every pod, from creation to Running and Ready.
	PendingToRunning Stat `json:"pendingToRunning"`
	// PendingToRunningNewNode: the pods that waited for a new node, from creation to Running
	// and Ready (target: p50 ≤ the p50 of the joins they waited for + 3 s).
	PendingToRunningNewNode Stat `json:"pendingToRunningNewNode"`
	// NewNodeJoin: per pod that needed a new node, the join it waited for: its NodeGroup
	// created → its Node joined. The live profile draws each group's join, so no one delay
	// stands for them.
	NewNodeJoin Stat `json:"newNodeJoin"`
	// Overhead: per pod that needed a new node, pending → Running minus that join (which is
	// measured from the NodeGroup's creation, so includes the decision).
	Overhead Stat `json:"providerOverhead"`
	// Create is the provider's Create over the window, from Karpenter core's
	// karpenter_cloudprovider_duration_seconds{method="Create"}: count, exact mean, failures.
	Create CreateStat `json:"create"`
	// ClaimToLaunched: per NodeClaim of the window, created → provider ID set, on the bench's
	// clock: the Create duration plus core's launch bookkeeping (tens of ms).
	ClaimToLaunched Stat `json:"nodeClaimToLaunched"`
	// GroupToDecision: per managed NodeGroup of the window, created → the operator's decision
	// (Creating or QuotaExceeded), on the bench's clock: what Create waits for.
	GroupToDecision Stat `json:"nodeGroupToDecision"`
	// Unsynced is how long Karpenter core's cluster state was not synced during the window,
	// when the scenario traced it.
	Unsynced      *Unsynced              `json:"clusterStateUnsynced,omitempty"`
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
	// Series are the window's pods, nodes and fleet cost over time: the report's charts.
	Series *Series `json:"series,omitempty"`
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

// StepNames are the provisioning steps, in order. The decision is the operator's first
// status write (phase Creating); the node joins while the group is still Creating, and
// Synced comes later still, off the pod's path.
var StepNames = []string{
	"pending→nodeclaim", "nodeclaim→nodegroup", "nodegroup→decision",
	"decision→node joined", "node joined→registered", "registered→pod running",
}

// Close ends the window and computes the result.
func (w *Window) Close(name, description string) *Result {
	end := time.Now()
	gaps := w.TL.Stop()
	w.cancel()
	r := &Result{Name: name, Profile: w.b.Profile, Description: description, WallSeconds: round3(end.Sub(w.Start).Seconds()), Figures: map[string]float64{}}
	if gaps > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("the apiserver ended a watch %d time(s) during the window; what changed meanwhile is timed when the next list found it", gaps))
	}
	r.SimDelays.DecisionSeconds = w.ops.DecisionDelay.Seconds()
	r.SimDelays.JoinSeconds = w.ops.TypicalJoinDelay().Seconds()
	r.SimDelays.SyncMinSeconds = w.ops.SyncDelayMin.Seconds()
	r.SimDelays.SyncMaxSeconds = w.ops.SyncDelayMax.Seconds()
	r.SimDelays.TeardownSeconds = w.ops.TeardownDelay.Seconds()
	w.end = end
	w.TL.Read(func(tl *Timeline) {
		w.steps(tl, r)
		r.Series = series(tl, w.Start, end, w.e2e)
	})
	w.launchMetrics(r)
	if w.synced != nil {
		u := w.synced.unsynced(w.Start, end)
		w.TL.Read(func(tl *Timeline) { u.WithoutProviderIDSeconds = round3(tl.withoutProviderID(w.Start, end).Seconds()) })
		r.Unsynced = &u
	}
	r.Footprint = w.b.Sampler.footprint(w.Start, end)
	if evs, err := w.audit.Read(); err == nil {
		r.Requests = harness.CountRequests(evs, stack.ServiceAccountUser)
		for _, c := range r.Requests {
			r.RequestsTotal += c.Count
		}
	} else {
		r.Notes = append(r.Notes, "audit log unreadable: "+err.Error())
	}
	r.ErrorLines = len(w.s.ErrorLines())
	return r
}

// launchMetrics fills the Create figures from the controller's metrics, as deltas since
// Open, and adds healthy windows to the profile's Create histogram.
func (w *Window) launchMetrics(r *Result) {
	after, err := scrapeLaunchMetrics(w.b.Env.Controller())
	if err != nil || w.before == nil {
		r.Notes = append(r.Notes, fmt.Sprintf("Create metrics unavailable (scrape at open ok: %v; at close: %v)", w.before != nil, err))
		return
	}
	d := after.sub(w.before)
	r.Create = d.stat()
	w.b.timeouts[w.b.Profile] += d.timeouts
	if d.create.count > 0 && d.errors == 0 && d.timeouts == 0 {
		h := w.b.healthy[w.b.Profile]
		if h == nil {
			h = &healthyLaunches{}
			w.b.healthy[w.b.Profile] = h
		}
		h.create.add(d.create)
		h.launch = append(h.launch, w.launch...)
		h.decision = append(h.decision, w.decision...)
	}
}

func secs(a, b time.Time) float64 { return b.Sub(a).Seconds() }

// firstOf is the earliest non-zero time, or zero.
func firstOf(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}

func (w *Window) steps(tl *Timeline, r *Result) {
	cols := map[string][]float64{}
	var e2e, newNode, joins, overhead []float64
	w.launch, w.decision = nil, nil
	for _, c := range tl.Claims {
		if c.Created.Before(w.Start) {
			continue
		}
		r.Claims++
		if !c.ProviderID.IsZero() {
			w.launch = append(w.launch, secs(c.Created, c.ProviderID))
		}
	}
	for _, g := range tl.Groups {
		if g.Managed && !g.Created.Before(w.Start) {
			r.Groups++
			if !g.Rejected.IsZero() {
				r.Rejected++
			}
			if d := firstOf(g.Decided, g.Rejected); !d.IsZero() {
				w.decision = append(w.decision, secs(g.Created, d))
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
		// Whether the claim came before the pod is the apiserver's word (creation timestamps, to
		// the second), not the order the bench's watches delivered them in: a loaded apiserver
		// can deliver a pod's creation after the claim made for it.
		if g == nil || c == nil || c.CreationTimestamp.Before(p.CreationTimestamp) || g.Decided.IsZero() || n.Registered.IsZero() {
			continue // served by capacity that existed or was on its way before the pod
		}
		r.PodsOnNewNode++
		d := []float64{
			secs(p.Created, c.Created), secs(c.Created, g.Created), secs(g.Created, g.Decided),
			secs(g.Decided, n.Created), secs(n.Created, n.Registered), secs(n.Registered, p.Running),
		}
		for i, name := range StepNames {
			cols[name] = append(cols[name], d[i])
		}
		join := secs(g.Created, n.Created)
		newNode = append(newNode, secs(p.Created, p.Running))
		joins = append(joins, join)
		overhead = append(overhead, secs(p.Created, p.Running)-join)
	}
	w.e2e = e2e
	r.PendingToRunning = stat(e2e)
	r.PendingToRunningNewNode = stat(newNode)
	r.NewNodeJoin = stat(joins)
	r.Overhead = stat(overhead)
	r.ClaimToLaunched = stat(w.launch)
	r.GroupToDecision = stat(w.decision)
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
		price := stack.Sum(fams, "karpenter_clevercloud_catalog_flavor_price_hourly", map[string]string{"flavor": f.Name})
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
	return fleetCost(tl, pods, cat, cat), nil
}

func prices(cat []FlavorCost) map[string]float64 {
	price := map[string]float64{}
	for _, f := range cat {
		price[f.Name] = f.PriceHourly
	}
	return price
}

// fleetCost prices the live managed NodeGroups at cat's prices and bounds the pods' summed
// requests over bounded: cat itself, or cat less what every node's daemons take.
func fleetCost(tl *Timeline, pods []corev1.Pod, cat, bounded []FlavorCost) *Cost {
	price := prices(cat)
	c := &Cost{Fleet: map[string]int{}}
	tl.Read(func(tl *Timeline) {
		for _, g := range tl.Groups {
			if g.Managed && !g.Gone && g.Deleting.IsZero() && !g.Decided.IsZero() {
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
	c.Bound = LowerBound(bounded, cpu.MilliValue(), mem.Value(), int64(len(pods)))
	c.FleetHourly = round4(c.FleetHourly)
	c.Bound.CostHourly = round4(c.Bound.CostHourly)
	if c.Bound.CostHourly > 0 {
		c.Ratio = round3(c.FleetHourly / c.Bound.CostHourly)
	}
	return c
}

func round4(x float64) float64 { return float64(int64(x*10000+0.5)) / 10000 }

// Report is everything the bench writes.
type Report struct {
	Machine Machine `json:"machine"`
	// Simulator is what both profiles share; Profiles the operator's timings of each.
	Simulator map[string]string            `json:"simulator"`
	Profiles  map[string]map[string]string `json:"profiles"`
	// Checks are the figures with a target (the launch path's, the quota's, Karpenter's KWOK budgets).
	Checks []Check `json:"checks,omitempty"`
	// Overrides are the targets ThresholdsEnv moved from their defaults, by key.
	Overrides map[string]string `json:"overrides,omitempty"`
	Results   []*Result         `json:"scenarios"`
	Verdicts  map[string]string `json:"verdicts,omitempty"`
	HotPaths  []HotPath         `json:"hotPaths,omitempty"`
}

// Check is one measure against its target on one profile.
type Check struct {
	Measure string `json:"measure"`
	Profile string `json:"profile"`
	Target  string `json:"target"`
	Value   string `json:"value"`
	// Met is nil when the measure could not be taken (the scenario did not run or failed).
	Met      *bool  `json:"met,omitempty"`
	Scenario string `json:"scenario,omitempty"`
}

// Check records a measure against its target on the current profile.
func (b *Bench) Check(measure, target, scenario, value string, met bool) {
	b.Report.Checks = append(b.Report.Checks, Check{Measure: measure, Profile: b.Profile, Target: target, Value: value, Met: &met, Scenario: scenario})
}

// Unmeasured records a measure that could not be taken on the current profile.
func (b *Bench) Unmeasured(measure, target, scenario, why string) {
	b.Report.Checks = append(b.Report.Checks, Check{Measure: measure, Profile: b.Profile, Target: target, Value: why, Scenario: scenario})
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
	t.Logf("%s (%s): %d pods, %d running, pending→running p50 %.2fs p95 %.2fs, overhead p50 %.2fs, NodeClaim→provider ID p50 %.2fs p95 %.2fs (%d Creates, mean %.2fs), CPU %.1fs, peak RSS %.0f MB, %d requests",
		r.Name, r.Profile, r.Pods, r.PodsRunning, r.PendingToRunning.P50, r.PendingToRunning.P95, r.Overhead.P50, r.ClaimToLaunched.P50, r.ClaimToLaunched.P95, r.Create.N, r.Create.Mean,
		r.Footprint.CPUSeconds, r.Footprint.PeakRSSMB, r.RequestsTotal)
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

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
