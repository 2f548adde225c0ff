package catalog

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/metrics"
)

const subsystem = "catalog"

var (
	flavorPrice = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "flavor_price_hourly",
		Help: "Effective on-demand price of a flavor, in EUR per hour, as Karpenter sees it.",
	}, []string{"flavor"})
	// OverridesValid is 1 when the flavors overrides file loaded, 0 when it was rejected and
	// the controller runs on the base catalogue.
	OverridesValid = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "overrides_valid",
		Help: "1 when the flavors overrides file (FLAVORS_CONFIG_PATH) is in use, 0 when it was rejected and the base catalogue is used instead.",
	})
	// UnknownFlavorLookups counts NodeGroups whose flavor is not in the catalogue.
	UnknownFlavorLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "unknown_flavor_lookups_total",
		Help: "Lookups of a flavor the catalogue does not have; the instance type was synthesized.",
	}, []string{"flavor"})
	// capacityLearned counts corrections of a flavor's size from what a running node reports.
	capacityLearned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "capacity_learned_total",
		Help: "Corrections of a flavor's cpu or memory from the capacity a running node reports.",
	}, []string{"flavor"})
)

func init() {
	metrics.MustRegister(flavorPrice, OverridesValid, UnknownFlavorLookups, capacityLearned)
}
