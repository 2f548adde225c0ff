package quota

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/metrics"
)

const subsystem = "quota"

var (
	limitGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "limit",
		Help: "Organisation quota known in force, by resource (cpu in vCPU, memory_gb in nominal GB): configured, read from a refusal message, or pinned by a remembered refusal; 0 when unknown.",
	}, []string{"resource"})
	provenGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "limit_proven",
		Help: "Lower bound of the organisation quota proven by accepted launches (control plane and accepted NodeGroups), by resource; 0 when nothing is proven.",
	}, []string{"resource"})
	refusalsGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "refusals_remembered",
		Help: "Refused uses remembered: a launch that would bring the use to one of them or beyond, in both resources, is not made.",
	})
	usageGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "usage",
		Help: "Quota used by every NodeGroup and control-plane node of the cluster, by resource.",
	}, []string{"resource"})
	headroomGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "headroom",
		Help: "Quota left for new nodes under the limit in force, admitted launches included, by resource; absent while the limit is unknown.",
	}, []string{"resource"})
	leakGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "leaks_suspected",
		Help: "Reservations the quota engine may still hold for refused groups and groups deleted before they were built, by resource: counted as used, and no probe flies while above 0.",
	}, []string{"resource"})
	misconfiguredRefusals = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "refusals_within_configured_total",
		Help: "Launches the quota engine refused although the use they brought was within the configured limit (settings.quota): the configuration is wrong (the quota was lowered, or another cluster of the organisation uses part of it).",
	})
	leakLifetimeGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "leak_lifetime_assumed_seconds",
		Help: "How long the controller assumes the quota engine may keep the reservation of a refused group, or of a group deleted before it was built, delete included: suspected leaks are charged, and refused uses remembered, that long.",
	})
	probesGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "probes_in_flight",
		Help: "Launches admitted beyond the sure limit (a probe flies alone) and awaiting their verdict: 0 or 1.",
	})
)

// The gauges' series, resolved once: the tracker publishes on every count and verdict.
var (
	limitCPU, limitGB   = limitGauge.WithLabelValues("cpu"), limitGauge.WithLabelValues("memory_gb")
	provenCPU, provenGB = provenGauge.WithLabelValues("cpu"), provenGauge.WithLabelValues("memory_gb")
	usageCPU, usageGB   = usageGauge.WithLabelValues("cpu"), usageGauge.WithLabelValues("memory_gb")
	leakCPU, leakGB     = leakGauge.WithLabelValues("cpu"), leakGauge.WithLabelValues("memory_gb")
)

func init() {
	metrics.MustRegister(limitGauge, provenGauge, refusalsGauge, usageGauge, headroomGauge, leakGauge, probesGauge, misconfiguredRefusals, leakLifetimeGauge)
}
