// Package quota tracks the organisation quota (vCPU and nominal GB, control plane included) so
// the provider offers only flavors that fit the headroom, and admits concurrent launches
// against it atomically instead of serialising them or cycling create → reject → delete.
//
// The limit comes from the settings when the user knows it, else it is learned from the
// platform's rejection messages ("limit = 40.0 GB"). A learned limit expires, so a quota raise
// is picked up by one more attempt.
//
// Until a limit is known, CKE's default quota is a provisional one: launches that fit it are
// admitted concurrently, and launches beyond it go as probes. One probe at a time at first, so
// an organisation on the default quota gets at most one rejection before the limit is learned;
// every accepted probe proves more room and lets one more probe fly (the window doubles with
// each round of verdicts, up to MaxProbeWindow), so an organisation whose quota was raised
// grows in a few rounds instead of one node per round. The first rejection teaches the limit
// and closes the window; what was in flight then is the most that can be refused. A
// provisional limit never hides flavors from Karpenter; a configured or learned one does.
package quota

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// LearnedLimitTTL is how long a limit read from a rejection is trusted.
const LearnedLimitTTL = 15 * time.Minute

// DefaultLimit is CKE's default organisation quota, the provisional limit until the real one
// is configured or learned.
var DefaultLimit = Limit{CPU: 40, GB: 40}

// MaxProbeWindow bounds how many launches may be in flight beyond the provisional limit, hence
// how many the platform can refuse at once when the real limit is reached.
const MaxProbeWindow = 16

// ReservationTTL bounds how long an admitted launch holds headroom without its NodeGroup
// showing up in the usage (a crashed Create must not leak headroom forever).
const ReservationTTL = 2 * time.Minute

// Usage is an amount of quota: vCPUs and nominal GB of memory.
type Usage struct {
	CPU int64
	GB  int64
}

// Add returns u + o.
func (u Usage) Add(o Usage) Usage { return Usage{u.CPU + o.CPU, u.GB + o.GB} }

// Sub returns u − o.
func (u Usage) Sub(o Usage) Usage { return Usage{u.CPU - o.CPU, u.GB - o.GB} }

// FitsIn says whether u fits within headroom h, in both resources.
func (u Usage) FitsIn(h Usage) bool { return u.CPU <= h.CPU && u.GB <= h.GB }

func (u Usage) String() string { return fmt.Sprintf("%d vCPU / %d GB", u.CPU, u.GB) }

// Limit is the quota; a zero field is unknown and does not constrain.
type Limit struct {
	CPU int64
	GB  int64
}

type learned struct {
	value int64
	at    time.Time
}

type reservation struct {
	usage Usage
	at    time.Time
}

// Tracker holds the limit, the usage observed in the cluster and the launches admitted but
// not yet visible in that usage.
type Tracker struct {
	clock      clock.Clock
	configured Limit

	mu           sync.Mutex
	learnedCPU   learned
	learnedGB    learned
	usage        Usage
	observed     map[string]bool // NodeGroups counted in usage
	reservations map[string]reservation
	// floor is a proven lower bound of the limit: the use at which a probe was accepted,
	// probes still in flight excluded.
	floor Usage
	// probes are the launches admitted beyond the provisional limit, awaiting their verdict.
	probes map[string]bool
	// window is how many probes may be in flight: 1, plus one per accepted probe since the
	// last learned limit, at most MaxProbeWindow.
	window int
}

// NewTracker builds a tracker; configured fields that are zero are learned instead.
func NewTracker(clk clock.Clock, configured Limit) *Tracker {
	return &Tracker{clock: clk, configured: configured, observed: map[string]bool{}, reservations: map[string]reservation{},
		probes: map[string]bool{}, window: 1}
}

// Limit returns the limit in force, and whether each part was configured (else learned or unknown).
func (t *Tracker) Limit() Limit {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.limitLocked()
}

func (t *Tracker) limitLocked() Limit {
	l := t.configured
	now := t.clock.Now()
	if l.CPU == 0 && t.learnedCPU.value > 0 && now.Sub(t.learnedCPU.at) < LearnedLimitTTL {
		l.CPU = t.learnedCPU.value
	}
	if l.GB == 0 && t.learnedGB.value > 0 && now.Sub(t.learnedGB.at) < LearnedLimitTTL {
		l.GB = t.learnedGB.value
	}
	return l
}

// provisionalLocked is the limit launches are admitted against: the known limit where known,
// else CKE's default raised to what accepted probes proved.
func (t *Tracker) provisionalLocked() Limit {
	l := t.limitLocked()
	if l.CPU == 0 {
		l.CPU = max(DefaultLimit.CPU, t.floor.CPU)
	}
	if l.GB == 0 {
		l.GB = max(DefaultLimit.GB, t.floor.GB)
	}
	return l
}

// Learn records a limit read from a rejection ("CPU" or "RAM"). Configured limits win.
func (t *Tracker) Learn(resource string, limit float64) {
	if limit <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	v := learned{value: int64(limit), at: t.clock.Now()}
	switch resource {
	case "CPU":
		t.learnedCPU = v
	case "RAM":
		t.learnedGB = v
	}
	// The probes in flight are judged against the limit now known; no more go beyond it.
	clear(t.probes)
	t.window = 1
	t.publishLocked()
}

// Accepted records that the platform accepted a launch. An accepted probe proves the limit
// is at least the use it brought, which raises the provisional limit, and widens the window.
func (t *Tracker) Accepted(group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.probes[group] {
		return
	}
	delete(t.probes, group)
	proven := t.usedLocked()
	for p := range t.probes {
		if r, ok := t.reservations[p]; ok {
			proven = proven.Sub(r.usage) // not proven until accepted
		}
	}
	t.floor = Usage{CPU: max(t.floor.CPU, proven.CPU), GB: max(t.floor.GB, proven.GB)}
	t.window = min(t.window+1, MaxProbeWindow)
	t.publishLocked()
}

// Observe replaces the usage with a fresh count of the cluster, naming the NodeGroups it
// includes: their reservations are released, since they are now counted.
func (t *Tracker) Observe(u Usage, groups map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.usage, t.observed = u, groups
	for name := range t.reservations {
		if groups[name] {
			delete(t.reservations, name)
		}
	}
	t.publishLocked()
}

// Headroom is what is left of the known limit, and whether any limit is known. A part whose
// limit is unknown reports a very large headroom.
func (t *Tracker) Headroom() (Usage, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.headroomLocked()
}

const unbounded = int64(1) << 40

func (t *Tracker) headroomLocked() (Usage, bool) {
	return t.headroomAgainst(t.limitLocked())
}

// usedLocked is the observed use plus live reservations.
func (t *Tracker) usedLocked() Usage {
	used := t.usage
	now := t.clock.Now()
	for name, r := range t.reservations {
		if now.Sub(r.at) > ReservationTTL {
			delete(t.reservations, name)
			delete(t.probes, name)
			continue
		}
		used = used.Add(r.usage)
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

// Admit reserves headroom for a launch, atomically with the check, so concurrent launches
// never overcommit the quota together. It returns false with the headroom when it does not fit.
func (t *Tracker) Admit(group string, u Usage) (bool, Usage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.observed[group] {
		return true, Usage{} // already counted: an adopted group
	}
	known := t.limitLocked()
	h, _ := t.headroomAgainst(t.provisionalLocked())
	if !u.FitsIn(h) {
		// Beyond a known limit: refused. Beyond the provisional one only: a probe, if the
		// window has room.
		if (known.CPU > 0 && u.CPU > h.CPU) || (known.GB > 0 && u.GB > h.GB) || len(t.probes) >= t.window {
			return false, h
		}
		t.probes[group] = true
	}
	t.reservations[group] = reservation{usage: u, at: t.clock.Now()}
	t.publishLocked()
	return true, h
}

// Release drops a reservation whose launch failed.
func (t *Tracker) Release(group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.reservations, group)
	delete(t.probes, group)
	t.publishLocked()
}

func (t *Tracker) publishLocked() {
	l := t.limitLocked()
	h, _ := t.headroomLocked()
	limitGauge.WithLabelValues("cpu").Set(float64(l.CPU))
	limitGauge.WithLabelValues("memory_gb").Set(float64(l.GB))
	usageGauge.WithLabelValues("cpu").Set(float64(t.usage.CPU))
	usageGauge.WithLabelValues("memory_gb").Set(float64(t.usage.GB))
	probeWindowGauge.Set(float64(t.window))
	probesGauge.Set(float64(len(t.probes)))
	if l.CPU > 0 {
		headroomGauge.WithLabelValues("cpu").Set(float64(h.CPU))
	}
	if l.GB > 0 {
		headroomGauge.WithLabelValues("memory_gb").Set(float64(h.GB))
	}
}
