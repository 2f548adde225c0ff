package cloudprovider

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/metrics"
)

var (
	// acceptanceSeconds is the time from NodeGroup creation to the platform's verdict.
	acceptanceSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metrics.Namespace, Subsystem: metrics.NodeGroupSubsystem, Name: "acceptance_duration_seconds",
		Help:    "Time from NodeGroup creation to the node-group operator's decision (its first status write), by outcome.",
		Buckets: []float64{0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120},
	}, []string{"outcome"})
	// launches counts Create outcomes by flavor.
	launches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: metrics.NodeGroupSubsystem, Name: "launches_total",
		Help: "NodeGroup launches by flavor and outcome (Accepted, Transient, QuotaExceeded, Refused, FlavorUnsupported, Vanished, TimedOut).",
	}, []string{"flavor", "outcome"})
	// quotaRejections counts groups the organisation quota refused, by flavor and resource.
	quotaRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: metrics.NodeGroupSubsystem, Name: "quota_rejections_total",
		Help: "NodeGroups rejected by the organisation quota, by flavor and exceeded resource (CPU, RAM).",
	}, []string{"flavor", "resource"})
	// refusals counts groups the operator refused for a reason the provider cannot classify.
	refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: metrics.NodeGroupSubsystem, Name: "refusals_total",
		Help: "NodeGroups refused by the node-group operator for a ReconcileFailed reason the provider does not know, before the operator accepted them, by flavor and reason.",
	}, []string{"flavor", "reason"})
	// Vanished counts launched groups that disappeared before their node registered, by stage:
	// Create sees those that vanish before the operator accepts them, garbage collection the
	// others.
	Vanished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: metrics.NodeGroupSubsystem, Name: "vanished_total",
		Help: "NodeGroups that disappeared upstream before their node registered, by stage (acceptance, registration).",
	}, []string{"stage"})
)

// Stages of Vanished.
const (
	StageAcceptance   = "acceptance"
	StageRegistration = "registration"
)

func init() {
	metrics.MustRegister(acceptanceSeconds, launches, quotaRejections, refusals, Vanished)
}
