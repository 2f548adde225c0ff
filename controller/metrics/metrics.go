// Package metrics holds what the provider's metrics share: every one is named
// karpenter_clevercloud_<subsystem>_<name>. Each package declares the metrics it owns in its
// own metrics.go and registers them on controller-runtime's registry, so that they are served
// on the same /metrics endpoint as Karpenter core's. Alerts and dashboards name them: a name
// never changes.
package metrics

const (
	// Namespace is the prefix of every metric of the provider.
	Namespace = "karpenter_clevercloud"
	// NodeGroupSubsystem is the subsystem of the metrics about the NodeGroups the provider
	// launches, which the cloud provider, the launch follower and garbage collection count.
	NodeGroupSubsystem = "nodegroup"
)
