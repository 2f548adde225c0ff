package pricing

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/metrics"
)

const subsystem = "pricing"

// Resources, the values of the rate metric's resource label.
const (
	ResourceVCPU  = "vcpu"
	ResourceRAMGB = "ram_gb"
)

// The metrics are process-wide, as the registry is: one refresher runs per controller.
var (
	refreshAttempts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "refresh_attempts_total",
		Help: "Price and flavor-list refreshes attempted against Clever Cloud's public API.",
	})
	refreshFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "refresh_failures_total",
		Help: "Refreshes that failed, by the endpoint at fault (price_system, catalog) and " +
			"reason (request, timeout, status, too_large, malformed, invalid, sink). Each failure keeps the last good prices. " +
			"An unreadable product listing does not fail a refresh: see product_listing_available.",
	}, []string{"endpoint", "reason"})
	productListingAvailable = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "product_listing_available",
		Help: "1 when the last successful refresh read the product listing (/v4/kubernetes-product) and offers its flavors " +
			"(of CLEVER_CLOUD_TOPOLOGY, if set); 0 when it could not be read (it answers 401 without a token since 2026-09) " +
			"and every catalogue flavor is offered, the topology ignored; 0 before the first success.",
	})
	consecutiveFailures = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "consecutive_failures",
		Help: "Refreshes failed in a row since the last success; 0 when the last refresh succeeded.",
	})
	lastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "last_success_timestamp_seconds",
		Help: "Unix time of the last refresh whose prices were accepted and applied; 0 before the first. " +
			"Alert on time() minus this exceeding twice the refresh period.",
	})
	ratesInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: subsystem, Name: "rate_hourly",
		Help: "Rate in use per resource (vcpu: per vCPU, ram_gb: per nominal GB), in EUR per hour: " +
			"the base catalogue's until a refresh succeeds.",
	}, []string{"resource"})
)

func init() {
	metrics.MustRegister(refreshAttempts, refreshFailures, productListingAvailable, consecutiveFailures, lastSuccess, ratesInUse)
}

// ReportRates publishes the rates the catalogue prices with: the base catalogue's, which the
// controller reports at start-up whether or not a refresher runs, then each live rate a
// refresh applies.
func ReportRates(r catalog.Rates) {
	ratesInUse.WithLabelValues(ResourceVCPU).Set(r.VCPUHourly)
	ratesInUse.WithLabelValues(ResourceRAMGB).Set(r.RAMGBHourly)
}
