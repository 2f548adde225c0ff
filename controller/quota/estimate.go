package quota

import (
	"time"
)

type stamp struct {
	value int64
	at    time.Time
}

// refusedPoint is a use the quota engine refused: any use at least as large in both
// resources is refused too while it is remembered.
type refusedPoint struct {
	use   Usage
	until time.Time
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

// statedLocked is the part of the limit that is stated: configured, else said by a message.
func (t *Tracker) statedLocked() Limit {
	l := t.configuredLocked()
	if l.CPU == 0 {
		l.CPU = t.live(t.saidCPU, learnedLimitTTL)
	}
	if l.GB == 0 {
		l.GB = t.live(t.saidGB, learnedLimitTTL)
	}
	return l
}

// liveRefusalsLocked returns the refused points still remembered; the expired ones move to
// the history that keeps CKE's default from being assumed again (sureLocked).
func (t *Tracker) liveRefusalsLocked() []refusedPoint {
	now := t.clock.Now()
	kept := t.refusals[:0]
	for _, r := range t.refusals {
		if now.Before(r.until) {
			kept = append(kept, r)
		} else {
			t.history = append(t.history, r)
		}
	}
	clear(t.refusals[len(kept):])
	t.refusals = kept
	hist := t.history[:0]
	for _, r := range t.history {
		if now.Sub(r.until) < defaultDoubtTTL {
			hist = append(hist, r)
		}
	}
	clear(t.history[len(hist):])
	t.history = hist
	if len(t.history) > maxRefusals {
		t.history = t.history[len(t.history)-maxRefusals:]
	}
	return kept
}

// limitLocked is the limit known in force: stated where stated, else pinned by a remembered
// refusal whose other resource is proven (or stated) to fit. A refusal that leaves both
// resources open pins neither: it only rules out the uses at least as large in both
// (refusedLocked), whichever resource ran out.
func (t *Tracker) limitLocked() Limit {
	stated, floor := t.statedLocked(), t.floorLocked()
	l := stated
	for _, r := range t.liveRefusalsLocked() {
		l = pin(l, stated, floor, r.use)
	}
	return l
}

// pin lowers l to exclude the refused point p in the one resource that can have run out:
// when p's CPU is within what is proven or stated, memory ran out, and the other way round.
// With both within (a contradiction: the quota was lowered, another consumer appeared, a leak
// nobody suspected) or neither, nothing is pinned.
func pin(l, stated Limit, floor, p Usage) Limit {
	cpuFits := p.CPU <= floor.CPU || (stated.CPU > 0 && p.CPU <= stated.CPU)
	gbFits := p.GB <= floor.GB || (stated.GB > 0 && p.GB <= stated.GB)
	switch {
	case cpuFits && !gbFits && stated.GB == 0 && (l.GB == 0 || p.GB-1 < l.GB):
		l.GB = p.GB - 1
	case gbFits && !cpuFits && stated.CPU == 0 && (l.CPU == 0 || p.CPU-1 < l.CPU):
		l.CPU = p.CPU - 1
	}
	return l
}

// sureLocked is the limit a launch is sure to fit when nothing changes upstream: stated where
// stated; else the proven use, or CKE's default quota when no refusal of the last
// defaultDoubtTTL contradicts it (a refusal within the default means the organisation has
// less: a lowered quota, or other clusters using it); capped by what a refusal pinned.
func (t *Tracker) sureLocked() Usage {
	stated, floor, known := t.statedLocked(), t.floorLocked(), t.limitLocked()
	prior := Usage{CPU: max(DefaultLimit.CPU, floor.CPU), GB: max(DefaultLimit.GB, floor.GB)}
	// A refusal within the default is remembered as a contradiction past its own expiry
	// (history): the default's batch of sure launches would be refused together again.
	for _, r := range append(t.liveRefusalsLocked(), t.history...) {
		if r.use.FitsIn(prior) {
			prior = floor
			break
		}
	}
	s := prior
	if stated.CPU > 0 {
		s.CPU = stated.CPU
	}
	if stated.GB > 0 {
		s.GB = stated.GB
	}
	if known.CPU > 0 {
		s.CPU = min(s.CPU, known.CPU)
	}
	if known.GB > 0 {
		s.GB = min(s.GB, known.GB)
	}
	return s
}

// class is what the tracker knows of a launch that would bring the use to a point.
type class uint8

const (
	// sure: the point is within the sure limit: the launch may fly beside others.
	sure class = iota
	// unsure: nothing known rules the point in or out: the launch may fly alone, as a probe.
	unsure
	// ruledOut: the point is beyond the known limit, or at least as large as a remembered
	// refused use in both resources: the launch would be refused.
	ruledOut
)

func (t *Tracker) classifyLocked(point Usage) class {
	known := t.limitLocked()
	if (known.CPU > 0 && point.CPU > known.CPU) || (known.GB > 0 && point.GB > known.GB) {
		return ruledOut
	}
	for _, r := range t.liveRefusalsLocked() {
		if r.use.FitsIn(point) {
			return ruledOut
		}
	}
	if point.FitsIn(t.sureLocked()) {
		return sure
	}
	return unsure
}

// Limit returns the limit known in force: configured, read from a refusal message, or pinned
// by a remembered refusal; a zero field is unknown.
func (t *Tracker) Limit() Limit {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.limitLocked()
}

// Proven returns the proven lower bound of the limit (0 where nothing is proven).
func (t *Tracker) Proven() Usage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.floorLocked()
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
	t.changedLocked()
}

// Accepted records that the platform accepted a launch (its first status write said Creating,
// or it synced): the limit is at least the proven use with it, and a remembered refusal at
// that use or below is history (the quota was raised, or the use that caused it went).
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
	t.changedLocked()
}

// raiseFloorLocked raises the lower bound to the proven use (the last observation's accepted
// use plus the accepted launches it did not show yet) and forgets the refusals it contradicts.
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
	if proven == (Usage{}) {
		return
	}
	contradicted := func(r refusedPoint) bool { return r.use.FitsIn(proven) }
	t.refusals = deleteFunc(t.refusals, contradicted)
	t.history = deleteFunc(t.history, contradicted)
}

func deleteFunc(ps []refusedPoint, del func(refusedPoint) bool) []refusedPoint {
	kept := ps[:0]
	for _, p := range ps {
		if !del(p) {
			kept = append(kept, p)
		}
	}
	clear(ps[len(kept):])
	return kept
}

// Refused records that the quota refused a launch of size u, and returns what was inferred.
// It ends the launch's reservation, stops charging the group if an observation still does
// (so the headroom never counts a refused group), and suspects the engine of keeping its
// reservation for the leak's lifetime.
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
	t.refusedGroups[group] = reservation{usage: u, at: now}
	// The engine may keep a refused group's reservation for minutes once it is deleted (§5):
	// charged as a suspected leak, it keeps the next launches from being refused for it, and
	// keeps probes from flying until it is gone.
	t.leaks = append(t.leaks, reservation{usage: u, at: now})

	// A refusal at a use the proofs said fits, in every resource, means the quota was lowered
	// since (or another consumer appeared): the proofs are history. What still runs proves
	// nothing either (the engine never takes holdings back): the next acceptance proves anew.
	if floor := t.floorLocked(); point.FitsIn(floor) && floor != (Usage{}) {
		t.floorCPU, t.floorGB = stamp{}, stamp{}
	}
	r := Refusal{Point: point}
	if t.withinConfiguredLocked(point) {
		// The configuration says this use fits: believe it, and say it is wrong. Remembering
		// the refusal would silently override what the user stated.
		r.Misconfigured = true
		misconfiguredRefusals.Inc()
	} else {
		t.rememberLocked(point)
		r.For = refusalMemory()
	}
	est := t.limitLocked()
	r.Limit = est
	switch overCPU, overGB := est.CPU > 0 && point.CPU > est.CPU, est.GB > 0 && point.GB > est.GB; {
	case overGB && !overCPU:
		r.Resource = ResourceRAM
	case overCPU && !overGB:
		r.Resource = ResourceCPU
	}
	t.changedLocked()
	return r
}

// rememberLocked adds a refused point, remembered for refusalTTL. Points the new one makes
// redundant (a refusal at a smaller use says more) are dropped.
func (t *Tracker) rememberLocked(use Usage) {
	kept := t.liveRefusalsLocked()
	p := refusedPoint{use: use, until: t.clock.Now().Add(refusalMemory())}
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

// withinConfiguredLocked says whether the configuration states both resources' limits and a
// use is within them. With one resource left to inference, a refusal within the stated one may
// be the other's: it is remembered like any refusal, not reported as a misconfiguration.
func (t *Tracker) withinConfiguredLocked(u Usage) bool {
	c := t.configuredLocked()
	return c.CPU > 0 && c.GB > 0 && u.FitsIn(Usage(c))
}

// SetConfigured replaces the configured limit (settings.quota; a zero field is inferred). It
// takes effect at once: refused uses the configuration says fit are forgotten, so a limit the
// user states is never overridden by what the tracker remembered before.
func (t *Tracker) SetConfigured(l Limit) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.configured = l
	t.dropConfiguredLocked()
	t.changedLocked()
}

func (t *Tracker) configuredLocked() Limit {
	if mutations.ignoreConfigured {
		return Limit{}
	}
	return t.configured
}

func (t *Tracker) dropConfiguredLocked() {
	within := func(r refusedPoint) bool { return t.withinConfiguredLocked(r.use) }
	t.refusals = deleteFunc(t.refusals, within)
	t.history = deleteFunc(t.history, within)
}

// Headroom is what is left of the limit known in force, and whether any is in force. A part
// whose limit is unknown reports a very large headroom. It is negative only when the cluster
// really uses more than the limit (a quota lowered under what runs): a refused group is never
// charged, even while a stale count or its deletion still shows it.
func (t *Tracker) Headroom() (Usage, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.headroomAgainst(t.limitLocked())
}

// ProvisionalHeadroom is what is left of the sure limit (stated where stated, else the proven
// use or CKE's default when nothing contradicts it), and whether it is provisional: false when
// the limit known in force is complete (use Headroom). Launches within it fly together;
// beyond it, one at a time.
func (t *Tracker) ProvisionalHeadroom() (Usage, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.limitLocked(); l.CPU > 0 && l.GB > 0 {
		return Usage{}, false
	}
	return t.sureLocked().Sub(t.usedLocked()), true
}

// Blocked says whether a launch of size u would not be made now: it would be refused (beyond
// the known limit, or at least as large as a remembered refusal in both resources), or it
// must go as a probe while reservations suspected leaked upstream could make the probe's
// verdict say nothing, or while a smaller flavor some pending pod can use should be probed
// first (ProbeAtMost). Flavors it blocks are offered as unavailable.
func (t *Tracker) Blocked(u Usage) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.blockedLocked(u, true)
}

// BlockedAnySize is Blocked without the smallest-probe rule, for a NodePool with minValues:
// fewer flavors would fail it, and a larger probe costs less than a pool that cannot launch.
func (t *Tracker) BlockedAnySize(u Usage) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.blockedLocked(u, false)
}

func (t *Tracker) blockedLocked(u Usage, smallestProbe bool) bool {
	switch t.classifyLocked(t.usedLocked().Add(u)) {
	case ruledOut:
		return true
	case unsure:
		return t.leakedLocked() != (Usage{}) || (smallestProbe && t.beyondProbeCeilingLocked(u))
	}
	return false
}

// unbounded is the headroom of a resource whose limit is unknown: more than any cluster uses,
// so it never constrains.
const unbounded = int64(1) << 40

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
