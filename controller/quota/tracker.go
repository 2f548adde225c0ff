// Package quota tracks the organisation quota (vCPU and nominal GB, control plane included) so
// the provider offers only flavors that fit the headroom, and admits concurrent launches
// against it atomically instead of serialising them or cycling create → reject → delete.
//
// The limit comes from the settings when the user knows it. Otherwise it is inferred from the
// platform's verdicts against the use the provider counts, because today's refusals carry no
// message:
//
//   - an accepted launch proves the limit is at least the use it brought: the proven use
//     (control plane and accepted groups) is a lower bound per resource;
//   - a refused launch proves the use it would have brought exceeds the limit in at least one
//     resource: a refused point, an upper bound on one resource or the other. The point is the
//     most the quota engine can have judged with the launch — everything in flight at any
//     time during the launch's wait — because the engine judges concurrent creations together.
//
// From those bounds the tracker keeps one estimate: CKE's default quota raised to what was
// proven, lowered only where a refusal contradicts it, in the resource a proof leaves open
// (the refusal pins it) or, when both are open, the one the refusal exceeded most relative to
// the estimate. While a refusal is remembered the estimate is in force: flavors beyond its
// headroom are offered as unavailable and nothing is launched beyond it. Bounds expire, so a
// raised quota is found by one more attempt. Older clusters still say the limit in the message
// ("limit = 40.0 GB"); it is taken as exact for its resource when present (Learn).
//
// Until a refusal is remembered, CKE's default quota (raised to what was proven) is a
// provisional limit: launches that fit it are admitted concurrently, and launches beyond it go
// as probes. One probe at a time at first, so an organisation on the default quota gets at
// most one refusal before the limit is inferred; every accepted probe lets one more probe fly
// (the window grows with each round of verdicts, up to 16 probes), so an organisation
// whose quota was raised grows in a few rounds instead of one node per round. The first
// refusal closes the window. A provisional limit hides flavors from Karpenter only where its
// headroom holds every pending pod (SteerWithin): no probe is needed then, and a refused one
// may leave its reservation held upstream for minutes.
package quota

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// learnedLimitTTL is how long a bound is trusted: a proven use, a refusal consistent with CKE's
// default quota, or a limit read from a refusal message.
const learnedLimitTTL = 15 * time.Minute

// lowRefusalTTL is how long a refusal below CKE's default quota (raised to what was proven) is
// trusted. Such a refusal is as likely a reservation the quota engine leaked (create → reject
// → delete bursts and deletes during the first reconcile leak for minutes) as a lower limit.
const lowRefusalTTL = 3 * time.Minute

// DefaultLimit is CKE's default organisation quota, the provisional limit until the real one
// is configured or inferred.
var DefaultLimit = Limit{CPU: 40, GB: 40}

// maxProbeWindow bounds how many launches may be in flight beyond the provisional limit, hence
// how many the platform can refuse at once when the real limit is reached.
const maxProbeWindow = 16

// reservationTTL bounds how long an admitted launch holds headroom without its NodeGroup
// showing up in the usage (a crashed Create must not leak headroom forever), and how long a
// launch waits for its verdict before it is forgotten.
const reservationTTL = 2 * time.Minute

// maxRefusals bounds the refused points remembered; the oldest go first.
const maxRefusals = 32

// Usage is an amount of quota: vCPUs and nominal GB of memory.
type Usage struct {
	CPU int64
	GB  int64
}

// Add returns u + o.
func (u Usage) Add(o Usage) Usage { return Usage{u.CPU + o.CPU, u.GB + o.GB} }

// Times returns u for each of n nodes.
func (u Usage) Times(n int64) Usage { return Usage{u.CPU * n, u.GB * n} }

// Sub returns u − o.
func (u Usage) Sub(o Usage) Usage { return Usage{u.CPU - o.CPU, u.GB - o.GB} }

// FitsIn says whether u fits within headroom h, in both resources.
func (u Usage) FitsIn(h Usage) bool { return u.CPU <= h.CPU && u.GB <= h.GB }

// Max returns the larger of u and o in each resource.
func (u Usage) Max(o Usage) Usage { return Usage{max(u.CPU, o.CPU), max(u.GB, o.GB)} }

func (u Usage) String() string { return fmt.Sprintf("%d vCPU / %d GB", u.CPU, u.GB) }

// Limit is the quota; a zero field is unknown and does not constrain.
type Limit struct {
	CPU int64
	GB  int64
}

func (l Limit) String() string {
	part := func(v int64) string {
		if v == 0 {
			return "unknown"
		}
		return fmt.Sprint(v)
	}
	return part(l.CPU) + " vCPU / " + part(l.GB) + " GB"
}

// leakTTL is how long the quota engine may keep charging an accepted group deleted while its
// first reconcile ran, once it is gone: minutes on today's platform, 3 in the simulator that
// models it, plus a margin for the delete to land. The tracker charges such a group as long, so the engine's
// leak causes no refusal.
const leakTTL = 3*time.Minute + 15*time.Second

// GroupState is what an observation says of one NodeGroup.
type GroupState uint8

const (
	// GroupUncharged: the group exists but charges nothing (the quota refused it).
	GroupUncharged GroupState = iota
	// GroupCharged: the group is charged, the platform's decision not seen.
	GroupCharged
	// GroupCreating: the platform accepted the group and is building it (its first
	// reconcile runs: deleting it now leaks its reservation upstream).
	GroupCreating
	// GroupBuilt: the platform accepted the group and built it.
	GroupBuilt
)

// accepted says whether the platform accepted a group in this state.
func (s GroupState) accepted() bool { return s == GroupCreating || s == GroupBuilt }

// Group is what an observation says of one NodeGroup.
type Group struct {
	State GroupState
	// Size is what the group charges, or would charge if it were not refused.
	Size Usage
	// Deleting says the group is being deleted.
	Deleting bool
}

// Observation is a fresh count of what the organisation quota charges in the cluster.
type Observation struct {
	// Usage is every charged NodeGroup's nodes plus the control plane.
	Usage Usage
	// Proven is the part of Usage the platform accepted: accepted groups plus the control
	// plane. Every accepted group alive now was alive when the last of them was accepted, so
	// the limit is at least Proven.
	Proven Usage
	// Groups are the NodeGroups the count saw, by name.
	Groups map[string]Group
}

// The resources the quota engine names in a refusal, as its messages spell them, and the
// resource of a refusal attributed to neither.
const (
	ResourceCPU     = "CPU"
	ResourceRAM     = "RAM"
	ResourceUnknown = "unknown"
)

// Refusal is what the tracker inferred from a quota refusal.
type Refusal struct {
	// Point is the most the quota engine can have judged together with the refused launch.
	Point Usage
	// Resource is ResourceCPU or ResourceRAM when the estimate says the point exceeded that
	// resource only, else "".
	Resource string
	// Limit is the estimate in force after the refusal.
	Limit Limit
	// Explained says the estimate rules the point out, so nothing launched within it will
	// be refused at that use again. A refusal the proven use leaves unexplained (a leak
	// upstream, another cluster) is not.
	Explained bool
}

type stamp struct {
	value int64
	at    time.Time
}

type reservation struct {
	usage Usage
	at    time.Time
}

// launch is an admitted launch awaiting its verdict.
type launch struct {
	size  Usage
	at    time.Time
	probe bool
	// peak is the most the tracker counted (every launch in flight included) while this one
	// was in flight: the most the quota engine can have judged together with it.
	peak Usage
}

type refusedPoint struct {
	use   Usage
	until time.Time
}

// Tracker holds the bounds on the limit, the usage observed in the cluster and the launches
// admitted but not yet visible in that usage.
type Tracker struct {
	clock      clock.Clock
	configured Limit

	mu sync.Mutex
	// said are limits read from refusal messages of clusters not upgraded, by resource.
	saidCPU, saidGB stamp
	usage           Usage
	proven          Usage
	groups          map[string]Group
	// leaks are what the quota engine may still charge for accepted groups gone from the count.
	leaks []reservation
	// creatingDeleted are groups deleted while the platform was building them, by name:
	// their reservation leaks once they are gone.
	creatingDeleted map[string]Usage
	reservations    map[string]reservation
	launches        map[string]*launch
	// vouched are launches the platform accepted that no observation has shown accepted yet.
	vouched map[string]reservation
	// refusedGroups are refused launches an observation may still charge (a stale cache).
	refusedGroups map[string]reservation
	// floorCPU and floorGB are the proven lower bounds of the limit.
	floorCPU, floorGB stamp
	refusals          []refusedPoint
	// window is how many probes may be in flight: 1, plus one per accepted probe since the
	// last refusal, at most maxProbeWindow.
	window int
}

// NewTracker builds a tracker; configured fields that are zero are inferred instead.
func NewTracker(clk clock.Clock, configured Limit) *Tracker {
	return &Tracker{clock: clk, configured: configured, groups: map[string]Group{}, creatingDeleted: map[string]Usage{},
		reservations: map[string]reservation{}, launches: map[string]*launch{}, vouched: map[string]reservation{},
		refusedGroups: map[string]reservation{}, window: 1}
}

// Limit returns the limit in force: configured, read from a refusal message, or inferred while
// a refusal is remembered; a zero field is unknown.
func (t *Tracker) Limit() Limit {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.limitLocked()
}

func (t *Tracker) live(s stamp, ttl time.Duration) int64 {
	if s.value > 0 && t.clock.Since(s.at) < ttl {
		return s.value
	}
	return 0
}

func (t *Tracker) floorLocked() Usage {
	return Usage{CPU: t.live(t.floorCPU, learnedLimitTTL), GB: t.live(t.floorGB, learnedLimitTTL)}
}

// fixedLocked is the part of the limit that is stated: configured, else said by a message.
func (t *Tracker) fixedLocked() Limit {
	l := t.configured
	if l.CPU == 0 {
		l.CPU = t.live(t.saidCPU, learnedLimitTTL)
	}
	if l.GB == 0 {
		l.GB = t.live(t.saidGB, learnedLimitTTL)
	}
	return l
}

// priorLocked is the stated limit where stated, else CKE's default raised to what was proven.
func (t *Tracker) priorLocked() Limit {
	l, floor := t.fixedLocked(), t.floorLocked()
	if l.CPU == 0 {
		l.CPU = max(DefaultLimit.CPU, floor.CPU)
	}
	if l.GB == 0 {
		l.GB = max(DefaultLimit.GB, floor.GB)
	}
	return l
}

func (t *Tracker) liveRefusalsLocked() []refusedPoint {
	now := t.clock.Now()
	kept := t.refusals[:0]
	for _, r := range t.refusals {
		if now.Before(r.until) {
			kept = append(kept, r)
		}
	}
	clear(t.refusals[len(kept):])
	t.refusals = kept
	return kept
}

// limitLocked is the stated limit, or, while a refusal is remembered, the estimate: the prior
// lowered where a remembered refusal would fit it.
func (t *Tracker) limitLocked() Limit {
	fixed := t.fixedLocked()
	refusals := t.liveRefusalsLocked()
	if len(refusals) == 0 {
		return fixed
	}
	est, floor := t.priorLocked(), t.floorLocked()
	for _, r := range refusals {
		est = lower(est, fixed, floor, r.use)
	}
	return est
}

// lower returns est lowered so that the refused point p no longer fits it, in a resource that
// is neither stated nor proven to fit p. When a proof leaves only one such resource, the
// refusal pins it; when both are open, the one p exceeds most relative to est goes (memory on a
// tie: CKE's flavors have more GB than vCPUs, and the engine checks RAM first). A point the
// proofs and stated limits leave no room to exclude contradicts them (a leak upstream, or
// another cluster's use) and changes nothing.
func lower(est, fixed Limit, floor, p Usage) Limit {
	if p.CPU > est.CPU || p.GB > est.GB {
		return est // already excluded
	}
	openCPU := fixed.CPU == 0 && p.CPU > floor.CPU
	openGB := fixed.GB == 0 && p.GB > floor.GB
	switch {
	case openCPU && openGB:
		// p.CPU/est.CPU > p.GB/est.GB, in integers.
		if p.CPU*est.GB > p.GB*est.CPU {
			est.CPU = p.CPU - 1
		} else {
			est.GB = p.GB - 1
		}
	case openCPU:
		est.CPU = p.CPU - 1
	case openGB:
		est.GB = p.GB - 1
	}
	return est
}

// provisionalLocked is the limit launches are admitted against: the known limit where known,
// else the prior.
func (t *Tracker) provisionalLocked() Limit {
	l, prior := t.limitLocked(), t.priorLocked()
	if l.CPU == 0 {
		l.CPU = prior.CPU
	}
	if l.GB == 0 {
		l.GB = prior.GB
	}
	return l
}

// Learn records a limit read from a refusal message (ResourceCPU or ResourceRAM) of a cluster
// that still says it. Configured limits win.
func (t *Tracker) Learn(resource string, limit float64) {
	if limit <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	v := stamp{value: int64(limit), at: t.clock.Now()}
	switch resource {
	case ResourceCPU:
		t.saidCPU = v
	case ResourceRAM:
		t.saidGB = v
	}
	t.closeWindowLocked()
	t.publishLocked()
}

// closeWindowLocked ends probing: the probes in flight are judged against the limit now known.
func (t *Tracker) closeWindowLocked() {
	for _, l := range t.launches {
		l.probe = false
	}
	t.window = 1
}

// Accepted records that the platform accepted a launch (its first status write said Creating,
// or it synced): the limit is at least the proven use with it. An accepted probe widens the
// window.
func (t *Tracker) Accepted(group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.launches[group]
	if l == nil {
		return // not launched by this process, or already judged
	}
	delete(t.launches, group)
	if !t.groups[group].State.accepted() {
		t.vouched[group] = reservation{usage: l.size, at: t.clock.Now()}
	}
	t.raiseFloorLocked()
	if l.probe {
		t.window = min(t.window+1, maxProbeWindow)
	}
	t.publishLocked()
}

// raiseFloorLocked raises the lower bound to the proven use: the last observation's accepted
// use plus the accepted launches it did not show yet.
func (t *Tracker) raiseFloorLocked() {
	now := t.clock.Now()
	proven := t.proven
	for name, v := range t.vouched {
		if now.Sub(v.at) > reservationTTL {
			delete(t.vouched, name)
			continue
		}
		proven = proven.Add(v.usage)
	}
	raise := func(s *stamp, v int64) {
		if v > 0 && v >= t.live(*s, learnedLimitTTL) {
			*s = stamp{value: v, at: now}
		}
	}
	raise(&t.floorCPU, proven.CPU)
	raise(&t.floorGB, proven.GB)
}

// Refused records that the quota refused a launch of size u. It returns what was inferred.
// It also ends the launch's reservation, and stops charging the group if an observation still
// does, so the headroom never counts a refused group.
func (t *Tracker) Refused(group string, u Usage) Refusal {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	used := t.usedLocked()
	_, reserved := t.reservations[group]
	if !reserved && t.groups[group].State == GroupUncharged {
		used = used.Add(u) // neither reserved nor charged any more: add what it asked for
	}
	point := used
	if l := t.launches[group]; l != nil {
		point = point.Max(l.peak)
	}
	delete(t.launches, group)
	delete(t.reservations, group)
	delete(t.vouched, group)
	if gr, ok := t.groups[group]; ok && gr.State != GroupUncharged {
		t.usage = t.usage.Sub(u)
		gr.State = GroupUncharged
		t.groups[group] = gr
	}
	// The engine may keep charging a refused group for minutes once it is deleted, but
	// not always: charging it here would hide every flavor that fits for minutes after each
	// refusal. A refusal that a leak causes is one below the estimate, trusted briefly
	// (lowRefusalTTL), so a leak costs at most one more refusal.
	t.refusedGroups[group] = reservation{usage: u, at: now}
	t.closeWindowLocked()

	// A refusal at a use the proofs said fits, in every resource, means the quota was lowered
	// since (or another consumer appeared): the proofs are history. Only what runs now, still
	// accepted, bounds the limit from below.
	if floor := t.floorLocked(); point.FitsIn(floor) && floor != (Usage{}) {
		t.floorCPU, t.floorGB = stamp{}, stamp{}
		t.raiseFloorLocked()
	}
	prior := t.priorLocked()
	ttl := learnedLimitTTL
	if point.FitsIn(Usage(prior)) {
		ttl = lowRefusalTTL
	}
	t.rememberLocked(refusedPoint{use: point, until: now.Add(ttl)})
	est := t.limitLocked()
	r := Refusal{Point: point, Limit: est, Explained: !point.FitsIn(Usage(est))}
	switch overCPU, overGB := point.CPU > est.CPU, point.GB > est.GB; {
	case overGB && !overCPU:
		r.Resource = ResourceRAM
	case overCPU && !overGB:
		r.Resource = ResourceCPU
	}
	t.publishLocked()
	return r
}

// rememberLocked adds a refused point, dropping the ones it makes redundant (a refusal at a
// smaller use says more).
func (t *Tracker) rememberLocked(p refusedPoint) {
	kept := t.liveRefusalsLocked()
	out := make([]refusedPoint, 0, len(kept)+1)
	for _, r := range kept {
		if p.use.FitsIn(r.use) && !r.until.After(p.until) {
			continue
		}
		out = append(out, r)
	}
	out = append(out, p)
	if len(out) > maxRefusals {
		out = out[len(out)-maxRefusals:]
	}
	t.refusals = out
}

// Observe replaces the usage with a fresh count, naming the NodeGroups it includes (true:
// charged). Prefer Record, which also carries the proven use.
func (t *Tracker) Observe(u Usage, groups map[string]bool) {
	o := Observation{Usage: u, Groups: make(map[string]Group, len(groups))}
	for name, charged := range groups {
		o.Groups[name] = Group{State: GroupUncharged}
		if charged {
			o.Groups[name] = Group{State: GroupCharged}
		}
	}
	t.Record(o)
}

// Record replaces the usage with a fresh count of the cluster. The reservations of the groups
// it saw end, since they are now counted; the proven use raises the limit's lower bound.
func (t *Tracker) Record(o Observation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	// A group deleted while the platform built it leaks its reservation once it is gone.
	for name, gr := range o.Groups {
		if gr.Deleting && gr.State == GroupCreating {
			t.creatingDeleted[name] = gr.Size
		}
	}
	for name, size := range t.creatingDeleted {
		if _, seen := o.Groups[name]; !seen {
			t.leaks = append(t.leaks, reservation{usage: size, at: now})
			delete(t.creatingDeleted, name)
		}
	}
	t.usage, t.proven, t.groups = o.Usage, o.Proven, o.Groups
	if t.groups == nil {
		t.groups = map[string]Group{}
	}
	for name := range t.reservations {
		if _, seen := t.groups[name]; seen {
			delete(t.reservations, name)
		}
	}
	for name := range t.vouched {
		if t.groups[name].State.accepted() {
			delete(t.vouched, name)
		}
	}
	// A cache that has not seen a refusal yet still charges the group: not again.
	for name, r := range t.refusedGroups {
		gr, seen := t.groups[name]
		switch {
		case now.Sub(r.at) > reservationTTL || (seen && gr.State == GroupUncharged):
			delete(t.refusedGroups, name)
		case seen:
			t.usage = t.usage.Sub(r.usage)
			gr.State = GroupUncharged
			t.groups[name] = gr
		}
	}
	t.raiseFloorLocked()
	t.notePeakLocked()
	t.publishLocked()
}

// notePeakLocked raises every waiting launch's peak to what is counted now.
func (t *Tracker) notePeakLocked() {
	used := t.usedLocked()
	for _, l := range t.launches {
		l.peak = l.peak.Max(used)
	}
}

// Headroom is what is left of the limit in force, and whether any limit is in force. A part
// whose limit is unknown reports a very large headroom. It is negative only when the cluster
// really uses more than the limit (a quota lowered under what runs): a refused group is never
// charged, even while a stale count or its deletion still shows it.
func (t *Tracker) Headroom() (Usage, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.headroomLocked()
}

// unbounded is the headroom of a resource whose limit is unknown: more than any cluster uses,
// so it never constrains.
const unbounded = int64(1) << 40

// FormatHeadroom writes a headroom for people, "unknown" for a resource whose limit is unknown.
func FormatHeadroom(h Usage) string {
	part := func(v int64) string {
		if v >= unbounded {
			return "unknown"
		}
		return fmt.Sprint(v)
	}
	return part(h.CPU) + " vCPU / " + part(h.GB) + " GB"
}

// ProvisionalHeadroom is what is left of the limit launches are admitted against while no
// limit is in force (CKE's default raised to the proven use, a stated part where stated), and
// whether that limit is provisional: false when a limit is in force (use Headroom).
func (t *Tracker) ProvisionalHeadroom() (Usage, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.limitLocked(); l.CPU > 0 || l.GB > 0 {
		return Usage{}, false
	}
	h, _ := t.headroomAgainst(t.provisionalLocked())
	return h, true
}

func (t *Tracker) headroomLocked() (Usage, bool) {
	return t.headroomAgainst(t.limitLocked())
}

// usedLocked is the observed use plus live reservations and leaks; it forgets launches that
// waited too long for a verdict.
func (t *Tracker) usedLocked() Usage {
	used := t.usage
	now := t.clock.Now()
	leaks := t.leaks[:0]
	for _, l := range t.leaks {
		if now.Sub(l.at) < leakTTL {
			leaks = append(leaks, l)
			used = used.Add(l.usage)
		}
	}
	clear(t.leaks[len(leaks):])
	t.leaks = leaks
	for name, r := range t.reservations {
		if now.Sub(r.at) > reservationTTL {
			delete(t.reservations, name)
			continue
		}
		used = used.Add(r.usage)
	}
	for name, l := range t.launches {
		if now.Sub(l.at) > reservationTTL {
			delete(t.launches, name)
		}
	}
	return used
}

func (t *Tracker) headroomAgainst(l Limit) (Usage, bool) {
	used := t.usedLocked()
	h := Usage{CPU: unbounded, GB: unbounded}
	if l.CPU > 0 {
		h.CPU = l.CPU - used.CPU
	}
	if l.GB > 0 {
		h.GB = l.GB - used.GB
	}
	return h, l.CPU > 0 || l.GB > 0
}

func (t *Tracker) probesLocked() int {
	n := 0
	for _, l := range t.launches {
		if l.probe {
			n++
		}
	}
	return n
}

// Admit reserves headroom for a launch, atomically with the check, so concurrent launches
// never overcommit the quota together. It returns false with the headroom when it does not fit.
// The launch then awaits Accepted, Refused or Release.
func (t *Tracker) Admit(group string, u Usage) (bool, Usage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.groups[group].State != GroupUncharged {
		return true, Usage{} // already counted: an adopted group
	}
	known := t.limitLocked()
	h, _ := t.headroomAgainst(t.provisionalLocked())
	probe := false
	if !u.FitsIn(h) {
		// Beyond a known limit: refused. Beyond the provisional one only: a probe, if the
		// window has room.
		if (known.CPU > 0 && u.CPU > h.CPU) || (known.GB > 0 && u.GB > h.GB) || t.probesLocked() >= t.window {
			return false, h
		}
		probe = true
	}
	now := t.clock.Now()
	t.reservations[group] = reservation{usage: u, at: now}
	t.launches[group] = &launch{size: u, at: now, probe: probe}
	t.notePeakLocked()
	t.publishLocked()
	return true, h
}

// Release drops a launch that failed before the platform judged it (or whose group is gone).
func (t *Tracker) Release(group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.reservations, group)
	delete(t.launches, group)
	t.publishLocked()
}

func (t *Tracker) publishLocked() {
	l := t.limitLocked()
	h, _ := t.headroomLocked()
	floor := t.floorLocked()
	limitGauge.WithLabelValues("cpu").Set(float64(l.CPU))
	limitGauge.WithLabelValues("memory_gb").Set(float64(l.GB))
	provenGauge.WithLabelValues("cpu").Set(float64(floor.CPU))
	provenGauge.WithLabelValues("memory_gb").Set(float64(floor.GB))
	usageGauge.WithLabelValues("cpu").Set(float64(t.usage.CPU))
	usageGauge.WithLabelValues("memory_gb").Set(float64(t.usage.GB))
	refusalsGauge.Set(float64(len(t.liveRefusalsLocked())))
	probeWindowGauge.Set(float64(t.window))
	probesGauge.Set(float64(t.probesLocked()))
	if l.CPU > 0 {
		headroomGauge.WithLabelValues("cpu").Set(float64(h.CPU))
	} else {
		headroomGauge.DeleteLabelValues("cpu")
	}
	if l.GB > 0 {
		headroomGauge.WithLabelValues("memory_gb").Set(float64(h.GB))
	} else {
		headroomGauge.DeleteLabelValues("memory_gb")
	}
}
