package operator

import (
	"time"

	"github.com/go-logr/logr"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/quotaengine"
)

// Options configure the operator. Every delay is measured from the group's creation (or,
// for a resize, from the operator seeing the new nodeCount); zero means "at once".
type Options struct {
	// QuotaCPU and QuotaRAMGB are the organisation quota. Zero means CKE's default, 40 / 40.
	// They may be raised or lowered at any time: what is held stays, later verdicts see it.
	QuotaCPU   int64
	QuotaRAMGB int64
	// OtherClusterCPU and OtherClusterGB are what the organisation's other clusters use of the
	// quota: counted by the quota engine, invisible to anything in this cluster.
	OtherClusterCPU int64
	OtherClusterGB  int64

	// DecisionDelay: creation → the operator's first status write, its decision (Creating
	// or QuotaExceeded). Live ~1 s.
	DecisionDelay time.Duration
	// JoinDelay: creation → the Node joins, while the group is still Creating: the fastest
	// join when JoinDelayMax spreads them (live 26 s), else every group's.
	JoinDelay time.Duration
	// JoinDelayMax > JoinDelay draws each group's join in JoinDelay–JoinDelayMax (live
	// 26–60 s), skewed so that most joins land near JoinDelay (see drawJoinDelay and
	// TypicalJoinDelay). Zero: every group joins at JoinDelay.
	JoinDelayMax time.Duration
	// SlowJoinProbability is the chance that a group's node joins only after SlowBootDelay,
	// as if it had FaultSlowBoot (live: one join took 185 s).
	SlowJoinProbability float64
	// SyncDelayMin and SyncDelayMax: creation → phase Synced with Ready=True, drawn per group
	// in this range (live 38–58 s). Never before the node joined.
	SyncDelayMin time.Duration
	SyncDelayMax time.Duration
	// SlowSyncProbability is the chance that a group syncs only after SlowSyncDelay (live:
	// one group stayed Creating 6 min 30 s).
	SlowSyncProbability float64
	SlowSyncDelay       time.Duration
	// Seed makes the per-group draws (join and sync delays, slow outliers) reproducible: a
	// group's draws depend only on Seed and its name.
	Seed uint64
	// TeardownDelay: delete (or scale-down) → the VM is gone and its Node deleted. Live 30–40 s.
	TeardownDelay time.Duration
	// VanishDelay: acceptance → the upstream deletion of FaultVanishAfterAccept groups.
	VanishDelay time.Duration
	// SlowBootDelay replaces the drawn join for FaultSlowBoot groups and the slow joins of
	// SlowJoinProbability.
	SlowBootDelay time.Duration
	// UpstreamErrorDuration is how long FaultUpstreamError lasts on each upstream call
	// (live: about an hour).
	UpstreamErrorDuration time.Duration
	// UpstreamErrorFrom and UpstreamErrorFor are a platform-wide upstream failure: from that
	// time, for that long, every group whose creation or resize runs shows UpstreamError
	// (decisions are still made), and its operation makes no progress; afterwards each
	// resumes where it stopped. Zero UpstreamErrorFor: none. See UpstreamOutage.
	UpstreamErrorFrom time.Time
	UpstreamErrorFor  time.Duration
	// UnknownFailureReason is the ReconcileFailed reason of FaultUnknownRefusal and
	// FaultDeadLaunch; empty means ReasonNetworkUnavailable.
	UnknownFailureReason string
	// Faults apply to every group that has no FaultAnnotation.
	Faults []Fault

	// QuotaBatchWindow > 0 makes the quota engine judge concurrent creations together:
	// a batch opens at the creation of its first member, takes every creation within the
	// window, and is judged at max(window, DecisionDelay) after it opened; if the members'
	// sum overflows the quota, all are refused. Each member still gets its verdict written
	// DecisionDelay after its own creation (with window ≤ DecisionDelay, as live).
	QuotaBatchWindow time.Duration
	// LeakedReservationTTL > 0 makes the quota engine keep, this long, the reservation of a
	// group deleted after a refusal, before its decision, or while its first reconcile runs.
	LeakedReservationTTL time.Duration
	// LegacyQuotaMessage writes the 2026-06 refusal message ("Quota exceeded: RAM max: limit
	// = 40.0 GB | actual = 48.0 GB") instead of today's empty one.
	LegacyQuotaMessage bool
	// StampTopologyLabels puts topology.kubernetes.io/region and /zone on nodes; today's
	// platform does not.
	StampTopologyLabels bool

	Log logr.Logger
}

// engineOptions are the quota engine's share of the operator's options.
func engineOptions(o Options) quotaengine.Options {
	return quotaengine.Options{
		Limit:         quotaengine.Usage{CPU: o.QuotaCPU, GB: o.QuotaRAMGB},
		Other:         quotaengine.Usage{CPU: o.OtherClusterCPU, GB: o.OtherClusterGB},
		BatchWindow:   o.QuotaBatchWindow,
		DecisionDelay: o.DecisionDelay,
		LeakTTL:       o.LeakedReservationTTL,
		LegacyMessage: o.LegacyQuotaMessage,
	}
}

func withDefaults(o Options) Options {
	if o.QuotaCPU == 0 {
		o.QuotaCPU = cke.DefaultQuotaCPU
	}
	if o.QuotaRAMGB == 0 {
		o.QuotaRAMGB = cke.DefaultQuotaRAMGB
	}
	if o.SyncDelayMax < o.SyncDelayMin {
		o.SyncDelayMax = o.SyncDelayMin
	}
	if o.UnknownFailureReason == "" {
		o.UnknownFailureReason = ReasonNetworkUnavailable
	}
	return o
}
