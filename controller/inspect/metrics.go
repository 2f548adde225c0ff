package inspect

import (
	"bytes"
	"context"
	"fmt"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Metrics are the few of the leader's metrics status reports.
type Metrics struct {
	// Preflight is each run-time preflight check's current result (pass, warn, fail).
	Preflight map[string]string
	// OverridesValid is karpenter_clevercloud_catalog_overrides_valid; nil when absent.
	OverridesValid *float64
	// Prices are the flavors' effective prices, the price refresher's included.
	Prices map[string]float64
}

// MetricsReader reads the metrics of the controller's pod.
type MetricsReader func(ctx context.Context, pod *corev1.Pod) (*Metrics, error)

// ProxyMetrics reads a pod's /metrics through the apiserver's pod proxy (get on pods/proxy),
// so that status needs no port-forward: only the leader runs the preflight checks and knows
// the refreshed prices, and the metrics Service would answer for either replica.
func ProxyMetrics(kube kubernetes.Interface) MetricsReader {
	return func(ctx context.Context, pod *corev1.Pod) (*Metrics, error) {
		port := metricsPort(pod)
		raw, err := kube.CoreV1().Pods(pod.Namespace).ProxyGet("http", pod.Name, port, "metrics", nil).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading /metrics of pod %s/%s through the apiserver's proxy (port %s): %w", pod.Namespace, pod.Name, port, err)
		}
		return ParseMetrics(raw)
	}
}

// metricsPort is the port the controller serves /metrics on: its METRICS_PORT, core's 8080
// by default.
func metricsPort(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "METRICS_PORT" && e.Value != "" {
				return e.Value
			}
		}
	}
	return "8080"
}

// ParseMetrics picks status's metrics out of a Prometheus text exposition.
func ParseMetrics(raw []byte) (*Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the controller's metrics: %w", err)
	}
	m := &Metrics{Preflight: map[string]string{}, Prices: map[string]float64{}}
	label := func(ls []*dto.LabelPair, name string) string {
		for _, l := range ls {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	if f := fams["karpenter_clevercloud_preflight_check"]; f != nil {
		for _, s := range f.GetMetric() {
			if value(s) == 1 {
				m.Preflight[label(s.GetLabel(), "check")] = label(s.GetLabel(), "result")
			}
		}
	}
	if f := fams["karpenter_clevercloud_catalog_overrides_valid"]; f != nil && len(f.GetMetric()) > 0 {
		v := value(f.GetMetric()[0])
		m.OverridesValid = &v
	}
	if f := fams["karpenter_clevercloud_catalog_flavor_price_hourly"]; f != nil {
		for _, s := range f.GetMetric() {
			m.Prices[label(s.GetLabel(), "flavor")] = value(s)
		}
	}
	return m, nil
}

// value is a gauge's value, or an untyped sample's (an exposition without TYPE lines).
func value(m *dto.Metric) float64 {
	if m.GetGauge() != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}
