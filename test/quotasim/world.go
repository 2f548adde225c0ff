// Package quotasim is a deterministic simulation of the provider's quota logic: the real
// tracker (controller/quota) admitting launches the way the cloud provider does, against the
// simulated CKE's own quota engine (sim/quotaengine, the one the simulated operator runs), on
// a fake clock, driven by random demand and a hostile platform: batch judging, leaked
// reservations, other clusters of the organisation using the quota unseen, the quota raised
// and lowered at run time, groups deleted during their first reconcile, groups resized by hand.
//
// One seed is one history. Run checks the guarantees the tracker documents on every step and
// returns the first violation with the seed and the trace of the steps that led to it, so a
// failure is reproduced by running that seed again.
package quotasim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/quotaengine"
)

// flavors are CKE's flavors in quota terms, cheapest first (the order Karpenter prefers).
var flavors = []quota.Usage{{CPU: 4, GB: 4}, {CPU: 6, GB: 8}, {CPU: 8, GB: 12}, {CPU: 10, GB: 16}, {CPU: 12, GB: 24}, {CPU: 16, GB: 32}}

var flavorNames = []string{"2XS", "XS", "S", "M", "L", "XL"}

// controlPlane is CKE's usual control plane: two S nodes.
var controlPlane = quota.Usage{CPU: 16, GB: 24}

// The platform's timings (cke-platform.md §5–§6): a decision about a second after creation
// (drawn per seed up to a few, so that verdicts span steps and probes in flight meet other
// launches), creations judged together while the first of them awaits its verdict, leaks "for minutes" (drawn per seed
// between the tracker's MinLeakLifetime and MaxLeakLifetime), a node in 26–185 s. The world
// moves in steps of a few seconds: what Karpenter launches in one step is one batch for the
// engine, as a provisioning pass's launches are.
const (
	step             = 3 * time.Second
	minDecisionDelay = 500 * time.Millisecond
	maxDecisionDelay = 5 * time.Second
	joinMin          = 26 * time.Second
	joinMax          = 185 * time.Second
	// teardown is how long a deleted group's VM takes to go (§6: 30–40 s): the engine holds
	// it, and the cluster's count shows it deleting, until then.
	teardown = 36 * time.Second
)

// Config shapes a run.
type Config struct {
	Seed uint64
	// Duration is how much simulated time one seed covers.
	Duration time.Duration
}

type podState uint8

const (
	pending   podState = iota // no group in flight
	launching                 // a group awaits its verdict, or its node
	running
)

type pod struct {
	id     int
	min    int // the smallest flavor that holds it
	state  podState
	group  string
	doneAt time.Time
	// fitsSince is when the platform last had room for the pod's smallest flavor while it
	// was pending with no group; zero while it has none.
	fitsSince time.Time
	// launchesBefore is how many launches were made before fitsSince: those made since are
	// ahead of the pod, each a verdict it may wait for.
	launchesBefore int
}

type groupState uint8

const (
	awaiting groupState = iota // created, no verdict
	building
	built
	refusedState
)

type group struct {
	name     string
	size     quota.Usage
	flavor   int
	pod      *pod
	state    groupState
	joinAt   time.Time
	deleting bool
	goneAt   time.Time
	probe    bool
	// nodes is the group's node count: 1, or 2 while a user's out-of-band resize holds.
	nodes    int64
	revertAt time.Time
}

// World is one history.
type World struct {
	cfg Config
	rng *rand.Rand
	clk *clocktesting.FakeClock
	eng *quotaengine.Engine
	tr  *quota.Tracker

	pods   []*pod
	groups map[string]*group
	seq    int
	trace  []string

	// epochStart is when the platform last changed (quota, other clusters).
	epochStart time.Time
	// configured says the user configured settings.quota with the organisation's real limit
	// (and keeps it up to date); no other cluster then uses the quota.
	configured bool
	leakTTL    time.Duration
	decision   time.Duration
	// probeRefusals are the times of refused probes, for the hourly rate.
	probeRefusals []time.Time
	// refusalsAt remembers deserved refusals of probes by engine state, to catch the same
	// probe refused again while its refusal should still be remembered.
	refusalsAt map[string]time.Time
	// pendingViolation is a violation found while applying verdicts, reported by check.
	pendingViolation *Violation
	// undeserved counts refusal rounds (decision times) the platform's real headroom did not
	// call for, by epoch start.
	undeserved map[time.Time]map[time.Time]bool

	Stats Stats
}

// Stats sums what a run did.
type Stats struct {
	Steps, Launches, Accepted, Refusals, Undeserved, Started int
	LongestWait                                              time.Duration
	// Waits are how long each pod the platform had room for waited for its group (G1).
	Waits []time.Duration
	// MaxProbeRefusalsInAnHour is the most refused probes seen in any hour.
	MaxProbeRefusalsInAnHour int
	// ProbeRefusals counts refused probes; UnmetDemand sums the time some pending pod had
	// no room upstream, for the rate of refused probes under demand that cannot be met.
	ProbeRefusals int
	UnmetDemand   time.Duration
}

// New builds a world for a seed.
func New(cfg Config) *World {
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	start := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	w := &World{cfg: cfg, rng: rng, clk: clocktesting.NewFakeClock(start), groups: map[string]*group{},
		refusalsAt: map[string]time.Time{}, undeserved: map[time.Time]map[time.Time]bool{}, epochStart: start}
	limit := []quotaengine.Usage{{CPU: 40, GB: 40}, {CPU: 40, GB: 32}, {CPU: 100, GB: 100}, {CPU: 60, GB: 48}, {CPU: 32, GB: 40}}[rng.IntN(5)]
	w.leakTTL = quota.MinLeakLifetime + time.Duration(rng.Int64N(int64(quota.MaxLeakLifetime-quota.MinLeakLifetime)+1))
	w.decision = minDecisionDelay + time.Duration(rng.Int64N(int64(maxDecisionDelay-minDecisionDelay)+1))
	w.configured = rng.IntN(5) == 0
	other := w.randomOther(limit)
	var configured quota.Limit
	if w.configured {
		other, configured = quotaengine.Usage{}, quota.Limit(limit)
	}
	w.eng = quotaengine.New(quotaengine.Options{Limit: limit, Other: other,
		BatchWindow: w.decision, DecisionDelay: w.decision, LeakTTL: w.leakTTL})
	w.eng.Hold("control-plane", quotaengine.Usage(controlPlane), start)
	w.tr = quota.NewTracker(w.clk, configured)
	w.logf("limit %v, other clusters %v, configured %v, leaks %s, verdicts %s", limit, other, w.configured, w.leakTTL, w.decision)
	return w
}

func (w *World) randomOther(limit quotaengine.Usage) quotaengine.Usage {
	if w.rng.IntN(2) == 0 {
		return quotaengine.Usage{}
	}
	n := int64(w.rng.IntN(3))
	return quotaengine.Usage{CPU: 4 * n, GB: 4 * n}.Add(quotaengine.Usage{CPU: limit.CPU / 10, GB: limit.GB / 10}.Times(int64(w.rng.IntN(2))))
}

func (w *World) now() time.Time { return w.clk.Now() }

func (w *World) logf(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%8s ", w.now().Sub(w.epochZero()).Round(time.Second))+fmt.Sprintf(format, args...))
}

func (w *World) epochZero() time.Time { return time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC) }

// Violation is a guarantee broken, with the history that broke it.
type Violation struct {
	Seed  uint64
	At    time.Duration
	What  string
	Trace []string
}

func (v *Violation) Error() string {
	tail := v.Trace
	if len(tail) > 60 {
		tail = tail[len(tail)-60:]
	}
	return fmt.Sprintf("seed %d, at %s: %s\nlast steps:\n%s", v.Seed, v.At, v.What, strings.Join(tail, "\n"))
}

func (w *World) violation(format string, args ...any) *Violation {
	return &Violation{Seed: w.cfg.Seed, At: w.now().Sub(w.epochZero()), What: fmt.Sprintf(format, args...), Trace: w.trace}
}

// Run plays the history to its end and returns the first violation, or nil.
func (w *World) Run() *Violation {
	end := w.now().Add(w.cfg.Duration)
	for w.now().Before(end) {
		w.Stats.Steps++
		w.platformEvents()
		w.demand()
		w.verdicts()
		w.nodes()
		w.observe()
		w.launch()
		w.observe()
		if v := w.check(); v != nil {
			return v
		}
		w.clk.Step(step)
	}
	return nil
}

// platformEvents changes the platform now and then: the quota raised or lowered, another
// cluster scaling, a group deleted by hand during its first reconcile.
func (w *World) platformEvents() {
	if w.chance(90 * time.Minute) {
		opts := w.eng.Options()
		limit := opts.Limit
		switch w.rng.IntN(3) {
		case 0:
			limit = quotaengine.Usage{CPU: limit.CPU + 20, GB: limit.GB + 20}
		case 1:
			limit = quotaengine.Usage{CPU: max(limit.CPU-12, 32), GB: max(limit.GB-12, 32)}
		default:
			limit = quotaengine.Usage{CPU: 40, GB: 40}
		}
		other := w.randomOther(limit)
		if w.configured {
			other = quotaengine.Usage{}
		}
		w.changePlatform(limit, other)
	}
	if w.chance(45 * time.Minute) {
		for _, name := range w.sortedGroups() {
			g := w.groups[name]
			if g.state == built && !g.deleting && g.nodes == 1 {
				ok, _ := w.eng.Resize(name, quotaengine.Usage(g.size.Times(2)), w.now())
				w.logf("%s resized by hand to 2 nodes: accepted %v", name, ok)
				if ok {
					g.nodes = 2
				}
				g.revertAt = w.now().Add(10 * time.Minute)
				break
			}
		}
	}
	for _, name := range w.sortedGroups() {
		if g := w.groups[name]; !g.revertAt.IsZero() && !w.now().Before(g.revertAt) {
			w.eng.Resize(name, quotaengine.Usage(g.size), w.now())
			g.nodes, g.revertAt = 1, time.Time{}
			w.logf("%s resized back to 1 node", name)
		}
	}
	if w.chance(30 * time.Minute) {
		for _, name := range w.sortedGroups() {
			g := w.groups[name]
			if g.state == building && !g.deleting {
				w.logf("%s deleted during its first reconcile", name)
				w.deleteGroup(g)
				// Its reservation leaks upstream for a time the tracker cannot know, and it
				// suspects the longest: a new event of the platform, from which G1 counts anew.
				w.restartWaits()
				break
			}
		}
	}
}

// chance is true about once per period.
func (w *World) chance(period time.Duration) bool { return w.rng.Int64N(int64(period)) < int64(step) }

func (w *World) changePlatform(limit, other quotaengine.Usage) {
	w.eng.Configure(w.now(), func(o *quotaengine.Options) { o.Limit, o.Other = limit, other })
	if w.configured {
		// The user keeps settings.quota up to date with the organisation's quota.
		w.tr.SetConfigured(quota.Limit(limit))
	}
	w.epochStart = w.now()
	w.logf("platform: limit %v, other clusters %v", limit, other)
}

// restartWaits makes G1 count from now for every pod: the platform changed in a way that may
// take room (a leak) rather than give it.
func (w *World) restartWaits() {
	for _, p := range w.pods {
		p.fitsSince = time.Time{}
	}
}

// demand adds pods now and then and ends running ones.
func (w *World) demand() {
	if w.chance(2 * time.Minute) {
		n := 1 + w.rng.IntN(6)
		lo := w.rng.IntN(len(flavors))
		for range n {
			w.seq++
			w.pods = append(w.pods, &pod{id: w.seq, min: min(lo+w.rng.IntN(2), len(flavors)-1)})
		}
		w.logf("%d pods arrive, from %s", n, flavorNames[lo])
	}
	for _, p := range w.pods {
		if p.state == running && !p.doneAt.IsZero() && !w.now().Before(p.doneAt) {
			w.logf("pod %d done, %s deleted", p.id, p.group)
			w.deleteGroup(w.groups[p.group])
			p.state, p.group = pending, ""
			p.doneAt = time.Time{}
			p.min = -1 // gone
		}
	}
	w.pods = slices.DeleteFunc(w.pods, func(p *pod) bool { return p.min < 0 })
	// Pods nobody can ever place are dropped after a while, as a user would.
	if len(w.pods) > 40 {
		w.pods = w.pods[len(w.pods)-40:]
	}
}

func (w *World) deleteGroup(g *group) {
	if g == nil || g.deleting {
		return
	}
	g.deleting = true
	g.goneAt = w.now()
	if g.state == building || g.state == built {
		g.goneAt = w.now().Add(teardown) // a VM to tear down
	}
	if g.pod != nil && g.pod.group == g.name && g.pod.state != running {
		g.pod.state, g.pod.group = pending, ""
	}
}

// verdicts applies the engine's decisions, as Create and the launch follower do.
func (w *World) verdicts() {
	for _, name := range w.sortedGroups() {
		g := w.groups[name]
		if g.state != awaiting || g.deleting {
			continue
		}
		d, ok := w.eng.Decide(name, w.now())
		if !ok {
			continue
		}
		if d.Accepted {
			g.state = building
			g.joinAt = w.now().Add(joinMin + time.Duration(w.rng.Int64N(int64(joinMax-joinMin))))
			w.tr.Accepted(name)
			w.Stats.Accepted++
			w.logf("%s (%s) accepted", name, flavorNames[g.flavor])
			continue
		}
		w.Stats.Refusals++
		held := w.eng.Held(w.now())
		nonLeak := held.Sub(w.eng.Leaked(w.now()))
		limit := w.eng.Options().Limit
		deserved := !nonLeak.Add(quotaengine.Usage(g.size)).Fits(limit)
		r := w.tr.Refused(name, g.size)
		g.state = refusedState
		w.logf("%s (%s, probe %v) refused: engine held %v (leaks %v), limit %v, deserved %v; tracker point %v for %s",
			name, flavorNames[g.flavor], g.probe, held, w.eng.Leaked(w.now()), limit, deserved, r.Point, r.For)
		if g.probe {
			w.Stats.ProbeRefusals++
			w.probeRefusals = append(w.probeRefusals, w.now())
			n := 0
			for _, at := range w.probeRefusals {
				if w.now().Sub(at) < time.Hour {
					n++
				}
			}
			w.Stats.MaxProbeRefusalsInAnHour = max(w.Stats.MaxProbeRefusalsInAnHour, n)
			if n > quota.MaxProbeRefusalsPerHour {
				w.pendingViolation = w.violation("G2: %d refused probes within an hour (at most %d)", n, quota.MaxProbeRefusalsPerHour)
			}
		}
		if w.configured && w.pendingViolation == nil {
			w.pendingViolation = w.violation("G2: %s refused although the configured limit is the organisation's real one", name)
		}
		if deserved && g.probe {
			// A probe flies alone: its refusal told the tracker exactly this use is refused.
			key := fmt.Sprintf("%d/%v/%v", g.flavor, nonLeak, limit)
			if at, seen := w.refusalsAt[key]; seen && w.now().Sub(at) < quota.RefusalMemory && at.After(w.epochStart) {
				w.pendingViolation = w.violation("G2: %s refused again at the same use %s after it was refused, not backing off", flavorNames[g.flavor], w.now().Sub(at))
			}
			w.refusalsAt[key] = w.now()
		}
		if !deserved {
			w.Stats.Undeserved++
			rounds := w.undeserved[w.epochStart]
			if rounds == nil {
				rounds = map[time.Time]bool{}
				w.undeserved[w.epochStart] = rounds
			}
			rounds[w.now()] = true
		}
		w.deleteGroup(g)
	}
}

// nodes joins the nodes of accepted groups and finishes the first reconcile.
func (w *World) nodes() {
	for _, name := range w.sortedGroups() {
		g := w.groups[name]
		if g.state == building && !g.deleting && !w.now().Before(g.joinAt) {
			g.state = built
			w.eng.Built(name, w.now())
			if g.pod != nil && g.pod.group == name {
				g.pod.state = running
				g.pod.doneAt = w.now().Add(time.Duration(2+w.rng.IntN(40)) * time.Minute)
				w.Stats.Started++
			}
		}
	}
}

// observe recounts the cluster for the tracker, as the usage controller does: the groups torn
// down are gone (the engine gives their holding back, or leaks it), the rest are counted.
func (w *World) observe() {
	for _, name := range w.sortedGroups() { // the engine's leaks keep their order
		if g := w.groups[name]; g.deleting && !w.now().Before(g.goneAt) {
			w.eng.Delete(name, w.now())
			delete(w.groups, name)
		}
	}
	o := quota.Observation{Usage: controlPlane, Proven: controlPlane, Groups: make(map[string]quota.Group, len(w.groups))}
	for name := range w.groups { // a sum and a map: the order does not matter
		g := w.groups[name]
		// A refused resize charges the running node only, as the usage controller counts it.
		gr := quota.Group{Size: g.size.Times(g.nodes), Deleting: g.deleting}
		switch g.state {
		case awaiting:
			gr.State = quota.GroupCharged
		case building:
			gr.State = quota.GroupCreating
		case built:
			gr.State = quota.GroupBuilt
		case refusedState:
			gr.State = quota.GroupUncharged
		}
		o.Groups[name] = gr
		if gr.State != quota.GroupUncharged {
			o.Usage = o.Usage.Add(gr.Size)
		}
		if gr.State == quota.GroupCreating || gr.State == quota.GroupBuilt {
			o.Proven = o.Proven.Add(gr.Size)
		}
	}
	w.tr.Record(o)
}

// launch plays Karpenter and the provider's Create: each pending pod gets the cheapest flavor
// that holds it and that the provider offers (not Blocked, within the headroom known), and
// the tracker admits it or not.
func (w *World) launch() {
	// The cloud provider's look at the pending pods: the smallest flavor one can use bounds
	// the probes.
	smallest := -1
	for _, p := range w.pods {
		if p.state == pending && (smallest < 0 || p.min < smallest) {
			smallest = p.min
		}
	}
	if smallest >= 0 {
		w.tr.ProbeAtMost(flavors[smallest])
	}
	offered := w.offered()
	for _, p := range w.pods {
		if p.state != pending {
			continue
		}
		f := -1
		for i := p.min; i < len(flavors); i++ {
			if offered[i] {
				f = i
				break
			}
		}
		if f < 0 {
			continue
		}
		w.seq++
		name := fmt.Sprintf("g%d", w.seq)
		a, _ := w.tr.Try(name, flavors[f])
		if a != quota.Admitted {
			continue
		}
		w.Stats.Launches++
		g := &group{name: name, size: flavors[f], flavor: f, pod: p, probe: w.tr.ProbesInFlight() > 0, nodes: 1}
		w.groups[name] = g
		p.state, p.group = launching, name
		w.eng.Create(name, quotaengine.Usage(flavors[f]), w.now())
		hp, _ := w.tr.ProvisionalHeadroom()
		w.logf("%s (%s) created for pod %d (sure headroom before %s, proven %v)", name, flavorNames[f], p.id, quota.FormatHeadroom(hp), w.tr.Proven())
		offered = w.offered() // what Karpenter's next look at the offerings says
	}
}

// offered is the provider's offerings: the flavors within the headroom known and not Blocked.
func (w *World) offered() []bool {
	h, limited := w.tr.Headroom()
	out := make([]bool, len(flavors))
	for i, f := range flavors {
		out[i] = (!limited || f.FitsIn(h)) && !w.tr.Blocked(f)
	}
	return out
}

// check asserts G1 (a pod that fits the real headroom waits a bounded time) and G2 (refusals
// the real headroom does not call for come at most once per platform change and per
// refusal memory, and the same probe is not refused again while remembered).
func (w *World) check() *Violation {
	if v := w.pendingViolation; v != nil {
		return v
	}
	// A change can make both resources' proofs stale: one round each to find out, and one more
	// each time CKE's default is trusted again after its contradiction was forgotten.
	if rounds := len(w.undeserved[w.epochStart]); rounds > 2+int(w.now().Sub(w.epochStart)/(quota.RefusalMemory+quota.DefaultDoubt)) {
		return w.violation("G2: %d rounds of refusals the real headroom did not call for since the platform last changed", rounds)
	}
	// G2: a probe flies alone, since the engine judges the launches awaiting a verdict together
	// and refuses them together: a launch beside a probe shares its refusal.
	awaitingNow, probe := 0, ""
	for _, name := range w.sortedGroups() {
		if g := w.groups[name]; g.state == awaiting && !g.deleting {
			awaitingNow++
			if g.probe {
				probe = name
			}
		}
	}
	if probe != "" && awaitingNow > 1 {
		return w.violation("G2: probe %s awaits its verdict beside %d other launches", probe, awaitingNow-1)
	}
	// G1, per pod: once the platform has room for a pending pod's smallest flavor, the pod
	// gets its group within quota.UptakeBound, whatever happened before.
	unmet := false
	for _, p := range w.pods {
		// The wait ends when the pod gets its NodeGroup. Should the platform refuse it (it had
		// no room by then: another launch, another cluster), the pod waits anew from when the
		// platform has room again.
		if p.state != pending {
			if !p.fitsSince.IsZero() {
				w.Stats.Waits = append(w.Stats.Waits, w.now().Sub(p.fitsSince))
			}
			p.fitsSince = time.Time{}
			continue
		}
		if !w.fits(p) {
			unmet = true
			p.fitsSince = time.Time{}
			continue
		}
		if p.fitsSince.IsZero() {
			p.fitsSince, p.launchesBefore = w.now(), w.Stats.Launches
			continue
		}
		waited := w.now().Sub(p.fitsSince)
		w.Stats.LongestWait = max(w.Stats.LongestWait, waited)
		ahead := w.Stats.Launches - p.launchesBefore
		if bound := quota.UptakeBound + time.Duration(ahead)*(w.decision+step); waited > bound {
			return w.violation("G1: pod %d (%s) waited %s with room for it upstream (bound %s: %s and %d launches ahead)", p.id, flavorNames[p.min], waited, bound, quota.UptakeBound, ahead)
		}
	}
	if unmet {
		w.Stats.UnmetDemand += step
	}
	return nil
}

// fits says whether the platform has room for a pod's smallest flavor now: what the engine
// holds (leaks included) and it, within the limit.
func (w *World) fits(p *pod) bool {
	return w.eng.Held(w.now()).Add(quotaengine.Usage(flavors[p.min])).Fits(w.eng.Options().Limit)
}

func (w *World) sortedGroups() []string {
	names := make([]string, 0, len(w.groups))
	for n := range w.groups {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
