package quota

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/metrics"
)

const subsystem = "quota"

var (
	limitGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "limit",
		Help: "Organisation quota in force, by resource (cpu in vCPU, memory_gb in nominal GB): configured, read from a refusal message, or inferred from refusals while one is remembered; 0 when unknown.",
	}, []string{"resource"})
	provenGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "limit_proven",
		Help: "Lower bound of the organisation quota proven by accepted launches (control plane and accepted NodeGroups), by resource; 0 when nothing is proven.",
	}, []string{"resource"})
	refusalsGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "refusals_remembered",
		Help: "Quota refusals the inferred limit rests on (each an upper bound on one resource or the other); the limit is in force while it is above 0.",
	})
	usageGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "usage",
		Help: "Quota used by every NodeGroup and control-plane node of the cluster, by resource.",
	}, []string{"resource"})
	headroomGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "headroom",
		Help: "Quota left for new nodes under the limit in force, admitted launches included, by resource; absent while the limit is unknown.",
	}, []string{"resource"})
	probeWindowGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "probe_window",
		Help: "How many launches may await their verdict beyond the provisional limit (CKE's default raised to the proven use) while the limit is unknown: 1, plus one per accepted probe, back to 1 at a refusal.",
	})
	probesGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "probes_in_flight",
		Help: "Launches admitted beyond the provisional limit and awaiting their verdict.",
	})
)

func init() {
	crmetrics.Registry.MustRegister(limitGauge, provenGauge, refusalsGauge, usageGauge, headroomGauge, probeWindowGauge, probesGauge)
}
