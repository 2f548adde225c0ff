package pricing

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

const metricsPrefix = "karpenter_clevercloud_pricing_"

// Resources, the values of the rate metric's resource label.
const (
	ResourceVCPU  = "vcpu"
	ResourceRAMGB = "ram_gb"
)

// The metrics are process-wide, as the registry is: one refresher runs per controller.
var (
	refreshAttempts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "refresh_attempts_total",
		Help: "Price and flavor-list refreshes attempted against Clever Cloud's public API.",
	})
	refreshFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "refresh_failures_total",
		Help: "Refreshes that failed, by the endpoint at fault (product, price_system, catalog) and " +
			"reason (request, timeout, status, too_large, malformed, invalid, sink). Each failure keeps the last good prices.",
	}, []string{"endpoint", "reason"})
	consecutiveFailures = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricsPrefix + "consecutive_failures",
		Help: "Refreshes failed in a row since the last success; 0 when the last refresh succeeded.",
	})
	lastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricsPrefix + "last_success_timestamp_seconds",
		Help: "Unix time of the last refresh whose prices were accepted and applied; 0 before the first. " +
			"Alert on time() minus this exceeding twice the refresh period.",
	})
	ratesInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricsPrefix + "rate_hourly",
		Help: "Rate in use per resource (vcpu: per vCPU, ram_gb: per nominal GB), in EUR per hour: " +
			"the base catalogue's until a refresh succeeds.",
	}, []string{"resource"})
)

func init() {
	crmetrics.Registry.MustRegister(refreshAttempts, refreshFailures, consecutiveFailures, lastSuccess, ratesInUse)
	// Without a refresher, or before it starts, the catalogue prices with the base rates.
	ratesInUse.WithLabelValues(ResourceVCPU).Set(ReferenceRates.VCPUHourly)
	ratesInUse.WithLabelValues(ResourceRAMGB).Set(ReferenceRates.RAMGBHourly)
}
