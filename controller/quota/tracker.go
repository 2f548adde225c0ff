// Package quota tracks the organisation quota (vCPU and nominal GB, control plane included) so
// the provider offers only flavors that can fit, and admits launches against it without
// cycling create → refuse → delete through CKE's quota engine.
//
// # What the provider observes
//
// Every NodeGroup of the cluster (its flavor, node count and status) and every control-plane
// node; the verdict on each of its own launches (accepted: the operator's first status write
// says Creating, or the group syncs; refused: QuotaExceeded, with an empty message on today's
// platform). It does not observe the limit, the use of the organisation's other clusters, nor
// the reservations the engine keeps after a refused group, or a group deleted before or
// during its first reconcile, goes (leaks, for minutes).
//
// # What it infers
//
//   - The use it counts (Observation) plus its launches awaiting a verdict plus the
//     reservations it suspects leaked (each refused launch, each group deleted before it was
//     built, for leakTTL): the most the engine can charge for this cluster.
//   - A lower bound (the proven use): an accepted launch proves the limit, less what others
//     use, is at least the accepted use with it. Trusted for learnedLimitTTL.
//   - Refused points: a refused launch proves the use it would have brought (everything in
//     flight with it, since the engine judges concurrent creations together) exceeds the limit
//     in one resource or the other. Any use at least as large in both resources is refused
//     too. When the other resource is proven to fit, the refusal pins one resource's limit.
//     A point is remembered for refusalTTL, twice as long each time the same use is probed and
//     refused again, up to maxRefusalTTL; an accepted use at or beyond it erases it.
//   - The sure limit: the stated limit (configured, or said by an older cluster's refusal
//     message), else CKE's default quota raised to the proven use, or only the proven use once
//     a remembered refusal falls within the default.
//
// # Admission
//
// A launch that keeps the use within the sure limit flies beside others. One ruled out (beyond
// a pinned or stated limit, or reaching a refused point) is not made: its flavor is offered as
// unavailable (Blocked). Any other launch is a probe: it flies alone (no launch awaits a
// verdict, none flies beside it) and only once no leak is suspected, so a refusal is never
// caused by another launch of ours nor by a leak the provider knows of.
//
// # Guarantees, whatever the history
//
//   - G1, progress: once the limit and the other clusters' use stop changing, a pod that fits
//     the real headroom is launched within leakTTL (the suspected leaks expire) plus one
//     verdict per probe ahead of it, and runs a node's join time later. After the platform
//     changed (a raised quota, another cluster scaling down), add the remaining memory of the
//     refusals the change made stale: at most maxRefusalTTL.
//   - G2, few refusals: a probe is only sent at a use no remembered refusal rules out, alone
//     and with no suspected leak, so the engine refuses it only for a limit not known before:
//     at most one refused NodeGroup per limit discovered (a batch of sure launches refused
//     together means the platform changed under a proof). While demand beyond the limit
//     persists, the same limit is probed again after 15, 30, then every 60 minutes.
//   - G3, raised quotas are used: nothing beyond the default is ruled out without a refusal,
//     and every refused point expires, so a raised quota is climbed by probes, one verdict
//     each, with no configured limit.
//   - G4, ownership: this package deletes nothing; every destructive path goes through the
//     one ownership proof (nodegroup.ClaimOf, confirmed by an uncached read).
//
// Configure the limit when you know it (settings): launches then all fly together within it.
package quota

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// learnedLimitTTL is how long a proven lower bound or a limit read from a message is trusted.
const learnedLimitTTL = 15 * time.Minute

// refusalTTL is how long a refused point is remembered the first time; maxRefusalTTL is the
// longest the backoff remembers one (and how long an expired one counts towards it).
const (
	refusalTTL    = 15 * time.Minute
	maxRefusalTTL = time.Hour
)

// The tracker's memory, for the deterministic simulation (test/quotasim) and the docs: how
// long a suspected leak is charged, and how long a refused use is remembered, first and at
// most.
const (
	ProofLifetime    = learnedLimitTTL
	LeakLifetime     = leakTTL
	RefusalMemory    = refusalTTL
	MaxRefusalMemory = maxRefusalTTL
)

// DefaultLimit is CKE's default organisation quota, the sure limit until a refusal within it
// says the organisation has less.
var DefaultLimit = Limit{CPU: 40, GB: 40}

// reservationTTL bounds how long an admitted launch holds headroom without its NodeGroup
// showing up in the usage (a crashed Create must not leak headroom forever), and how long a
// launch waits for its verdict before it is forgotten.
const reservationTTL = 2 * time.Minute

// maxRefusals bounds the refused points remembered; the oldest go first.
const maxRefusals = 32

// leakTTL is how long the quota engine may keep charging a refused group, or one deleted
// before it was built: minutes on today's platform, 3 in the simulator that models it, plus a
// margin for the delete to land.
const leakTTL = 3*time.Minute + 15*time.Second

// The resources the quota engine names in a refusal, as its messages spell them, and the
// resource of a refusal attributed to neither.
const (
	ResourceCPU     = "CPU"
	ResourceRAM     = "RAM"
	ResourceUnknown = "unknown"
)

// Refusal is what the tracker inferred from a quota refusal.
type Refusal struct {
	// Point is the most the quota engine can have judged together with the refused launch:
	// uses at least as large in both resources are not launched while it is remembered.
	Point Usage
	// Resource is ResourceCPU or ResourceRAM when the refusal pinned that resource's limit,
	// else "".
	Resource string
	// Limit is the limit known in force after the refusal.
	Limit Limit
	// For is how long the point is remembered.
	For time.Duration
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
	// leaks are reservations the quota engine may still hold for groups refused or gone.
	leaks []reservation
	// deletedEarly are groups deleted before the platform built them, by name: their
	// reservation leaks once they are gone.
	deletedEarly map[string]Usage
	reservations map[string]reservation
	launches     map[string]*launch
	// vouched are launches the platform accepted that no observation has shown accepted yet.
	vouched map[string]reservation
	// refusedGroups are refused launches an observation may still charge (a stale cache).
	refusedGroups map[string]reservation
	// floorCPU and floorGB are the proven lower bounds of the limit.
	floorCPU, floorGB stamp
	refusals          []refusedPoint
	// history holds expired refused points, for the backoff.
	history []refusedPoint
	// changed is closed at every change (Changed).
	changed chan struct{}
}

// NewTracker builds a tracker; configured fields that are zero are inferred instead.
func NewTracker(clk clock.Clock, configured Limit) *Tracker {
	return &Tracker{clock: clk, configured: configured, groups: map[string]Group{}, deletedEarly: map[string]Usage{},
		reservations: map[string]reservation{}, launches: map[string]*launch{}, vouched: map[string]reservation{},
		refusedGroups: map[string]reservation{}, changed: make(chan struct{})}
}

func (t *Tracker) publishLocked() {
	l := t.limitLocked()
	h, _ := t.headroomAgainst(l)
	floor := t.floorLocked()
	leaked := t.leakedLocked()
	limitCPU.Set(float64(l.CPU))
	limitGB.Set(float64(l.GB))
	provenCPU.Set(float64(floor.CPU))
	provenGB.Set(float64(floor.GB))
	usageCPU.Set(float64(t.usage.CPU))
	usageGB.Set(float64(t.usage.GB))
	leakCPU.Set(float64(leaked.CPU))
	leakGB.Set(float64(leaked.GB))
	refusalsGauge.Set(float64(len(t.liveRefusalsLocked())))
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
