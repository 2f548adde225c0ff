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
//     built, for LeakLifetime: the longest leak the design covers, MaxLeakLifetime, plus the
//     time the delete takes): the most the engine can charge for this cluster.
//   - A lower bound (the proven use): an accepted launch proves the limit, less what others
//     use, is at least the accepted use with it. Trusted for ProofLifetime.
//   - Refused points: a refused launch proves the use it would have brought (everything in
//     flight with it, since the engine judges concurrent creations together) exceeds the limit
//     in one resource or the other. Any use at least as large in both resources is refused
//     too. When the other resource is proven to fit, the refusal pins one resource's limit.
//     A point is remembered for RefusalMemory, as long as its own leak may hold it and no
//     longer; an accepted use at or beyond it erases it sooner.
//   - The sure limit: the stated limit (configured, or said by an older cluster's refusal
//     message), else CKE's default quota raised to the proven use, or only the proven use
//     while a refusal of the last DefaultDoubt falls within the default.
//
// # Admission
//
// A launch within the configured limit or the proven use flies beside others; one within
// CKE's default but not proven flies at most AssumedInFlight at a time. One ruled out (beyond
// a pinned or stated limit, or reaching a refused point) is not made: its flavor is offered as
// unavailable (Blocked). Any other launch is a probe: it flies alone (no launch awaits a
// verdict, none flies beside it), only once no leak is suspected, and only for the smallest
// flavor a pending pod can use (ProbeAtMost), so a refusal is never caused by another launch
// of ours nor by a leak the provider knows of, and proves the most it can.
//
// # Guarantees, whatever the history
//
//   - G1, uptake: once the platform has room for a pending pod's flavor, the pod's NodeGroup
//     is created within UptakeBound plus one verdict per launch ahead of it.
//   - G2, few refusals: under demand the platform cannot meet, at most
//     MaxProbeRefusalsPerHour refused probes in any hour; a batch on CKE's default costs at
//     most AssumedInFlight refused groups; with a right configured limit, none.
//   - G3, raised quotas are used: nothing beyond the default is ruled out without a refusal,
//     and every refused point expires within RefusalMemory, so a raised quota is climbed by
//     probes, one verdict each, with no configured limit.
//   - G4, ownership: this package deletes nothing; every destructive path goes through the
//     one ownership proof (nodegroup.ClaimOf, confirmed by an uncached read).
//
// docs/quota.md states the same with the durations' values; test/quotasim checks G1–G3 over
// thousands of random histories.
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

// The quota engine keeps the reservation of a refused group, or of a group deleted before it
// was built, "for minutes" (cke-platform.md §5). The tracker does not learn how long: it
// takes the longest lifetime the design covers, so that no probe flies into a leak whatever
// the platform's leak really lasts between MinLeakLifetime and MaxLeakLifetime, and no
// setting needs retuning when the platform changes. What it costs is bounded: a pod that fits
// waits at most the difference (UptakeBound).
const (
	MinLeakLifetime = time.Minute
	MaxLeakLifetime = 10 * time.Minute
	// leakMargin covers the time between a verdict and the delete that starts the leak
	// upstream (the launch follower's delete, the operator's finalizer).
	leakMargin = 15 * time.Second
)

// leakTTL is how long a suspected leak is charged, and keeps probes from flying.
const leakTTL = MaxLeakLifetime + leakMargin

// refusalTTL is how long a refused use stays ruled out: as long as the refused group's own
// leak may hold it. A shorter memory would probe into that leak; a longer one would keep a
// pod waiting after the platform freed room (another cluster scaling down, a raised quota),
// which the tracker cannot observe and only a probe finds. Probing the same use again after
// refusalTTL costs at most one refused NodeGroup per refusalTTL: fewer than
// MaxProbeRefusalsPerHour.
const refusalTTL = leakTTL

// defaultDoubtTTL is how long a refusal within CKE's default quota keeps the default from
// being assumed (launches beyond the proven use then go one probe at a time): it only slows
// how many launches fly together, never whether one flies.
const defaultDoubtTTL = time.Hour

// maxAssumedInFlight is how many launches may await their verdict together while the use
// they bring is only assumed to fit (CKE's default quota, not proven nor configured): the
// engine judges concurrent creations together and refuses them together, and another
// cluster of the organisation may use part of the default, so a first batch costs at most
// this many refused NodeGroups; verdicts come in about a second, so a burst is still decided
// within a few seconds.
const maxAssumedInFlight = 2

// The tracker's memory, for the deterministic simulation (test/quotasim) and the docs: how
// long a suspected leak is charged, how long a proof is trusted and how long a refused use
// is remembered.
const (
	ProofLifetime = learnedLimitTTL
	LeakLifetime  = leakTTL
	RefusalMemory = refusalTTL
	// DefaultDoubt is how long a refusal within CKE's default quota keeps the default from
	// being assumed.
	DefaultDoubt = defaultDoubtTTL
	// AssumedInFlight is how many launches fly together on an assumed quota.
	AssumedInFlight = maxAssumedInFlight
)

// UptakeBound is G1: once the platform has room for a pending pod's flavor (another cluster
// scaled down, the quota was raised, a leak ended), the pod's NodeGroup is created within this
// bound, whatever happened before. The room may appear just after a probe was refused: the
// tracker then waits out that probe's own leak (LeakLifetime) before it asks again;
// VerdictSlack pays for the verdicts of the launches ahead of the pod and Karpenter's next
// provisioning pass.
//
// It cannot be shorter while refused probes stay within MaxProbeRefusalsPerHour: the
// platform's room is not observable, so only a probe finds it, and probes of a use the
// platform keeps refusing must be at least an hour / MaxProbeRefusalsPerHour apart.
const UptakeBound = leakTTL + VerdictSlack

// VerdictSlack is what the launches and verdicts ahead of a pod may add to its wait: a probe
// in flight, a round of assumed launches, Karpenter's next provisioning pass.
const VerdictSlack = 45 * time.Second

// MaxProbeRefusalsPerHour is G2 under demand the platform cannot meet: refused probes never
// exceed it in any hour, since one flies only once every suspected leak, its own included,
// has expired.
const MaxProbeRefusalsPerHour = int((time.Hour + leakTTL - 1) / leakTTL)

// DefaultLimit is CKE's default organisation quota, the sure limit until a refusal within it
// says the organisation has less.
var DefaultLimit = Limit{CPU: 40, GB: 40}

// reservationTTL bounds how long an admitted launch holds headroom without its NodeGroup
// showing up in the usage (a crashed Create must not leak headroom forever), and how long a
// launch waits for its verdict before it is forgotten.
const reservationTTL = 2 * time.Minute

// maxRefusals bounds the refused points remembered; the oldest go first.
const maxRefusals = 32

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
	// For is how long the point is remembered; 0 when it is not (Misconfigured).
	For time.Duration
	// Misconfigured says the refused use was within the configured limit (settings.quota):
	// the configuration is wrong (the quota was lowered, another cluster of the organisation
	// uses part of it). The tracker believes the configuration and does not remember the
	// refusal; the caller reports it.
	Misconfigured bool
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
	// probeCeiling is the smallest flavor a pending pod can use, and when it was last said
	// (ProbeAtMost).
	probeCeiling reservation
	// awaitingRestore holds launches until a snapshot is restored (AwaitRestore), at most
	// until restoreBy (set by the first launch that waits).
	awaitingRestore bool
	restoreBy       time.Time
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
	leakLifetimeGauge.Set(leakLifetime().Seconds())
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
