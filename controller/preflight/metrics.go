package preflight

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/metrics"
)

var checkGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: metrics.Namespace, Subsystem: "preflight", Name: "check",
	Help: "Outcome of each preflight check the running controller repeats (docs/preflight.md): 1 on the series of its current result (pass, warn or fail), 0 on the others; absent until the first run.",
}, []string{"check", "result"})

func init() {
	metrics.MustRegister(checkGauge)
}

// publish sets the gauge from a report: one series per check and result.
func publish(r Report) {
	for _, c := range r {
		for _, res := range Results {
			v := 0.0
			if c.Result == res {
				v = 1
			}
			checkGauge.WithLabelValues(c.Name, string(res)).Set(v)
		}
	}
}
