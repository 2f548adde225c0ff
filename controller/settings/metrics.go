package settings

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/metrics"
)

// refusedGauge is 1 for each setting whose value the controller refused at start-up, running
// on its default instead: a process that stays up on a bad setting must still be seen.
var refusedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: metrics.Namespace, Subsystem: "settings", Name: "refused",
	Help: "1 for each setting whose value the controller refused at start-up and replaced by its default; the log says which value and why.",
}, []string{"setting", "variable"})

func init() {
	metrics.MustRegister(refusedGauge)
}

// ReportRefusals publishes the refusals of this start.
func ReportRefusals(refused []Refusal) {
	refusedGauge.Reset()
	for _, r := range refused {
		refusedGauge.WithLabelValues(r.Path, r.Env).Set(1)
	}
}
