package steering

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/metrics"
)

const subsystem = "steering"

var (
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "decisions_total",
		Help: "Steering decisions, one per NodePool for each look at the pending pods, by the reason that narrowed the flavors offered (none, quota, assumed-quota, cost).",
	}, []string{"nodepool", "reason"})
	hiddenFlavors = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "hidden_flavors",
		Help: "How many of the NodePool's available flavors the last steering decision offered as unavailable.",
	}, []string{"nodepool"})
	expectedHourly = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "expected_fleet_hourly_cost",
		Help: "What the last cost-steering decision expected the pending pods' new nodes to cost per hour, with the flavors it offered (offer=steered) and with every flavor the quota leaves (offer=unsteered); zero when cost steering did not narrow the offer. It prices every pending pod, those that nodes still joining will take included, so a pass that comes before the previous pass's nodes join reads high.",
	}, []string{"nodepool", "offer"})
)

func init() {
	metrics.MustRegister(decisions, hiddenFlavors, expectedHourly)
}

// Record reports a decision for the pool in the steering metrics.
func Record(pool string, d Decision, hidden int) {
	decisions.WithLabelValues(pool, string(d.Reason)).Inc()
	hiddenFlavors.WithLabelValues(pool).Set(float64(hidden))
	expectedHourly.WithLabelValues(pool, "steered").Set(d.Steered.Hourly)
	expectedHourly.WithLabelValues(pool, "unsteered").Set(d.Unsteered.Hourly)
}
