package launch

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/metrics"
)

var (
	// lateRefusals counts launches failed by a refusal published after Create returned.
	lateRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: metrics.NodeGroupSubsystem, Name: "late_refusals_total",
		Help: "Launched NodeGroups refused after Create returned (QuotaExceeded, or an unclassified refusal), whose NodeClaim was deleted so Karpenter plans again at once, by reason.",
	}, []string{"reason"})
	// transientFailures counts transient failures the operator reported on launches.
	transientFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: metrics.NodeGroupSubsystem, Name: "transient_failures_total",
		Help: "Transient failures (ReconcileFailed the operator retries on its own, e.g. UpstreamError) seen on launched NodeGroups before their node registered and synced, by reason. Nothing is deleted for them.",
	}, []string{"reason"})
	// launchesGivenUp counts launches given up for want of a node.
	launchesGivenUp = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: metrics.NodeGroupSubsystem, Name: "launches_given_up_total",
		Help: "Launched NodeGroups with no node past their give-up time after creation, whose NodeClaim was deleted so Karpenter plans again at once, by rule (operator_stopped: the operator stopped working on the group, settings.stoppedLaunchGiveUpAfter; no_node: settings.launchGiveUpAfter) and reason (the ReconcileFailed reason shown, else the outcome: Launched, Pending, Synced).",
	}, []string{"rule", "reason"})
	// launchesOverdue is the number of launches not Synced long after creation.
	launchesOverdue = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: metrics.NodeGroupSubsystem, Name: "launches_overdue",
		Help: "Launched NodeGroups still not Synced past the overdue threshold after creation (10 minutes by default), whose launch is still followed.",
	})
)

func init() {
	metrics.MustRegister(lateRefusals, transientFailures, launchesGivenUp, launchesOverdue)
}
