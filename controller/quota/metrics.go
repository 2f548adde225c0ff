package quota

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	limitGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter_clevercloud", Subsystem: "quota", Name: "limit",
		Help: "Organisation quota in force (configured or learned from a rejection), by resource (cpu in vCPU, memory_gb in nominal GB); 0 when unknown.",
	}, []string{"resource"})
	usageGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter_clevercloud", Subsystem: "quota", Name: "usage",
		Help: "Quota used by every NodeGroup and control-plane node of the cluster, by resource.",
	}, []string{"resource"})
	headroomGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter_clevercloud", Subsystem: "quota", Name: "headroom",
		Help: "Quota left for new nodes, admitted launches included, by resource; absent while the limit is unknown.",
	}, []string{"resource"})
	probeWindowGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "karpenter_clevercloud", Subsystem: "quota", Name: "probe_window",
		Help: "How many launches may await their verdict beyond the provisional limit (CKE's default raised by accepted probes) while the limit is unknown: 1, plus one per accepted probe, back to 1 when a limit is learned.",
	})
	probesGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "karpenter_clevercloud", Subsystem: "quota", Name: "probes_in_flight",
		Help: "Launches admitted beyond the provisional limit and awaiting their verdict.",
	})
)

func init() {
	crmetrics.Registry.MustRegister(limitGauge, usageGauge, headroomGauge, probeWindowGauge, probesGauge)
}
