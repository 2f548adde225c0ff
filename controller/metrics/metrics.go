// Package metrics holds what the provider's metrics share: every one is named
// karpenter_clevercloud_<subsystem>_<name>. Each package declares the metrics it owns in its
// own metrics.go and registers them through MustRegister on controller-runtime's registry, so
// that they are served on the same /metrics endpoint as Karpenter core's. Alerts and
// dashboards name them: a name never changes.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

const (
	// Namespace is the prefix of every metric of the provider.
	Namespace = "karpenter_clevercloud"
	// NodeGroupSubsystem is the subsystem of the metrics about the NodeGroups the provider
	// launches, which the cloud provider, the launch follower and garbage collection count.
	NodeGroupSubsystem = "nodegroup"
)

var (
	mu         sync.Mutex
	registered []prometheus.Collector
)

// MustRegister registers the collectors on controller-runtime's registry, which /metrics
// serves, and remembers them, so that the metrics reference (docs/reference/metrics.md) is
// written from the collectors themselves. It panics as the registry's MustRegister does.
func MustRegister(cs ...prometheus.Collector) {
	crmetrics.Registry.MustRegister(cs...)
	mu.Lock()
	defer mu.Unlock()
	registered = append(registered, cs...)
}

// Collectors are the collectors registered through MustRegister so far, in registration
// order: those of every package linked into the program, once their init has run.
func Collectors() []prometheus.Collector {
	mu.Lock()
	defer mu.Unlock()
	return append([]prometheus.Collector(nil), registered...)
}
