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
)

func init() {
	crmetrics.Registry.MustRegister(limitGauge, usageGauge, headroomGauge)
}
