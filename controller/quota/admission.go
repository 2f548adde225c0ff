package quota

import "time"

// launch is an admitted launch awaiting its verdict.
type launch struct {
	size  Usage
	at    time.Time
	probe bool
	// assumed: the use it brings was only assumed to fit (CKE's default quota), not proven
	// nor configured.
	assumed bool
	// peak is the most the tracker counted (every launch in flight included) while this one
	// was in flight: the most the quota engine can have judged together with it.
	peak Usage
}

// Admission is the tracker's answer to a launch.
type Admission uint8

const (
	// Admitted: the launch may be sent; its size is reserved until its verdict.
	Admitted Admission = iota
	// Busy: the launch may be sent once the launches in flight are judged (a probe flies
	// alone, and nothing flies beside a probe): wait for Changed and try again.
	Busy
	// NoRoom: the launch would be refused, or must wait for suspected leaks to expire.
	NoRoom
)

func (a Admission) String() string {
	switch a {
	case Admitted:
		return "Admitted"
	case Busy:
		return "Busy"
	}
	return "NoRoom"
}

// Try admits a launch of size u for a group, atomically with the check, so concurrent
// launches never overcommit the quota together. The launch then awaits Accepted, Refused or
// Release. It also returns the headroom under the sure limit, for messages.
//
// A launch within the sure limit flies beside other such launches. One beyond it, not ruled
// out, is a probe: the quota engine judges concurrent creations together and refuses them all
// when their sum overflows, so a probe flies alone, once no launch awaits a verdict and no
// reservation is suspected leaked (its refusal would then say nothing, and leak more).
func (t *Tracker) Try(group string, u Usage) (Admission, Usage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.groups[group].State != GroupUncharged {
		return Admitted, Usage{} // already counted: an adopted group
	}
	if t.restoringLocked() {
		return Busy, Usage{}
	}
	delete(t.launches, group) // a retried launch of the same group is judged afresh
	delete(t.reservations, group)
	used := t.usedLocked()
	h := t.sureLocked().Sub(used)
	probe, assumed := false, false
	point := used.Add(u)
	switch t.classifyLocked(point) {
	case ruledOut:
		return NoRoom, h
	case sure:
		if t.probesLocked() > 0 && !mutations.sureBesideProbe {
			return Busy, h
		}
		// Launches the engine may refuse together (an assumed quota another cluster uses part
		// of) fly a few at a time: a refused round costs at most maxAssumedInFlight groups.
		assumed = !point.FitsIn(t.provenLimitLocked())
		if (assumed || t.assumedInFlightLocked()) && len(t.launches) >= maxAssumedInFlight {
			return Busy, h
		}
	case unsure:
		// The smallest-probe rule is the offerings' (Blocked), which know the pool's
		// minValues; Try admits the flavor the offerings let Karpenter choose.
		if t.leakedLocked() != (Usage{}) {
			return NoRoom, h
		}
		if len(t.launches) > 0 {
			return Busy, h
		}
		probe = true
	}
	now := t.clock.Now()
	t.reservations[group] = reservation{usage: u, at: now}
	t.launches[group] = &launch{size: u, at: now, probe: probe, assumed: assumed}
	t.notePeakLocked()
	t.publishLocked()
	return Admitted, h
}

// probeCeilingTTL is how long the smallest flavor a pending pod can use (ProbeAtMost) bounds
// probes: a few of the cloud provider's looks at the pending pods, so that a pod served or
// gone stops bounding them soon after.
const probeCeilingTTL = 10 * time.Second

// ProbeAtMost says that some pending pod can use a flavor of size u: until probeCeilingTTL
// passes without it being said again, a probe (a launch beyond the sure limit) is only made
// for a flavor no larger. A small refused probe leaks least and proves most (every larger use
// is then ruled out too), and a small pod is never kept waiting behind a large pod's probe
// the platform keeps refusing.
func (t *Tracker) ProbeAtMost(u Usage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	if now.Sub(t.probeCeiling.at) >= probeCeilingTTL || u.FitsIn(t.probeCeiling.usage) {
		t.probeCeiling = reservation{usage: u, at: now}
	}
}

func (t *Tracker) beyondProbeCeilingLocked(u Usage) bool {
	c := t.probeCeiling
	return !c.at.IsZero() && t.clock.Since(c.at) < probeCeilingTTL && !u.FitsIn(c.usage)
}

// provenLimitLocked is what the limit is known to hold: stated where stated, else the proven
// use.
func (t *Tracker) provenLimitLocked() Usage {
	stated, floor := t.statedLocked(), t.floorLocked()
	p := floor
	if stated.CPU > 0 {
		p.CPU = max(p.CPU, stated.CPU)
	}
	if stated.GB > 0 {
		p.GB = max(p.GB, stated.GB)
	}
	return p
}

func (t *Tracker) assumedInFlightLocked() bool {
	for _, l := range t.launches {
		if l.assumed {
			return true
		}
	}
	return false
}

// Admit is Try for callers that do not wait: true when admitted.
func (t *Tracker) Admit(group string, u Usage) (bool, Usage) {
	a, h := t.Try(group, u)
	return a == Admitted, h
}

// Changed returns a channel closed at the next change of what the tracker knows (a verdict,
// a release, a count): what a Busy launch waits for before it tries again.
func (t *Tracker) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

func (t *Tracker) changedLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
	t.publishLocked()
}

// ProbesInFlight is how many launches beyond the sure limit await their verdict: 0 or 1.
func (t *Tracker) ProbesInFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.probesLocked()
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

// Release drops a launch that failed before the platform judged it (or whose group is gone).
func (t *Tracker) Release(group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.reservations, group)
	delete(t.launches, group)
	t.changedLocked()
}
