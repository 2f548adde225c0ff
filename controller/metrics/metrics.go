// Package metrics declares the provider's own Prometheus metrics, all under
// karpenter_clevercloud_*, registered on controller-runtime's registry so they are served on
// the same /metrics endpoint as Karpenter core's.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

const namespace = "karpenter_clevercloud"

var (
	// AcceptanceSeconds is the time from NodeGroup creation to the platform's verdict.
	AcceptanceSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "nodegroup", Name: "acceptance_duration_seconds",
		Help:    "Time from NodeGroup creation to the node-group operator's decision (its first status write), by outcome.",
		Buckets: []float64{0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120},
	}, []string{"outcome"})
	// Launches counts Create outcomes by flavor.
	Launches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodegroup", Name: "launches_total",
		Help: "NodeGroup launches by flavor and outcome (Accepted, Transient, QuotaExceeded, Refused, FlavorUnsupported, Vanished, TimedOut).",
	}, []string{"flavor", "outcome"})
	// QuotaRejections counts groups the organisation quota refused, by flavor and resource.
	QuotaRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodegroup", Name: "quota_rejections_total",
		Help: "NodeGroups rejected by the organisation quota, by flavor and exceeded resource (CPU, RAM).",
	}, []string{"flavor", "resource"})
	// Vanished counts launched groups that disappeared before their node registered.
	Vanished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodegroup", Name: "vanished_total",
		Help: "NodeGroups that disappeared upstream before their node registered, by stage (acceptance, registration).",
	}, []string{"stage"})
	// GarbageCollected counts orphaned groups the garbage collector deleted.
	GarbageCollected = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodegroup", Name: "garbage_collected_total",
		Help: "Orphaned NodeGroups (owner NodeClaim confirmed gone) that garbage collection deleted.",
	})
	// GarbageRefused counts groups that look managed but lack ownership proof.
	GarbageRefused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "nodegroup", Name: "garbage_collection_refused",
		Help: "NodeGroups that carry the provider's labels but name no NodeClaim UID, which garbage collection refuses to delete, by reason.",
	}, []string{"reason"})
	// Resized counts managed groups whose nodeCount was changed out of band.
	Resized = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "nodegroup", Name: "resized_out_of_band",
		Help: "Managed NodeGroups whose spec.nodeCount is not 1 (changed by hand or by another autoscaler).",
	})
	// Refusals counts groups the operator refused for a reason the provider cannot classify.
	Refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodegroup", Name: "refusals_total",
		Help: "NodeGroups refused by the node-group operator for a ReconcileFailed reason the provider does not know, before the operator accepted them, by flavor and reason.",
	}, []string{"flavor", "reason"})
	// LateRefusals counts launches failed by a refusal published after Create returned.
	LateRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodegroup", Name: "late_refusals_total",
		Help: "Launched NodeGroups refused after Create returned (QuotaExceeded, or an unclassified refusal), whose NodeClaim was deleted so Karpenter plans again at once, by reason.",
	}, []string{"reason"})
	// TransientFailures counts transient failures the operator reported on launches.
	TransientFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "nodegroup", Name: "transient_failures_total",
		Help: "Transient failures (ReconcileFailed the operator retries on its own, e.g. UpstreamError) seen on launched NodeGroups before their node registered and synced, by reason. Nothing is deleted for them.",
	}, []string{"reason"})
	// LaunchesOverdue is the number of launches not Synced long after creation.
	LaunchesOverdue = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "nodegroup", Name: "launches_overdue",
		Help: "Launched NodeGroups still not Synced past the overdue threshold after creation (10 minutes by default), whose launch is still followed.",
	})
	// CapacityLearned counts catalogue corrections from observed node capacity.
	CapacityLearned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "catalog", Name: "capacity_learned_total",
		Help: "Corrections of a flavor's cpu or memory from the capacity a running node reports.",
	}, []string{"flavor"})
)

func init() {
	crmetrics.Registry.MustRegister(AcceptanceSeconds, Launches, QuotaRejections, Vanished, GarbageCollected, GarbageRefused, Resized, CapacityLearned,
		Refusals, LateRefusals, TransientFailures, LaunchesOverdue)
}
