// Package values declares the deployment bundle's values tree: the controller's settings plus
// the knobs that shape its Deployment. It exists so that schema/values.schema.json is generated
// from Go types the controller compiles against, and the CUE bundle is validated against it.
package values

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
)

// BundleDefaults are the settings whose bundle default differs from the binary's, keyed by
// their path under settings. Everything else defaults to what the controller does with an
// empty environment; the bundle's tests hold the rendered Deployment to exactly this list.
var BundleDefaults = map[string]any{
	// The binary stays offline unless told otherwise; an installed provider should track
	// Clever Cloud's published prices so consolidation compares real costs.
	"pricing.enabled": true,
	// CKE sells no reservations, so Karpenter's reserved-capacity logic has nothing to do;
	// switching it off halved the scheduler's simulation time in docs/bench with no change in
	// behaviour. The binary keeps core's gates but NodeRepair off, as documented.
	"featureGates": "NodeRepair=false,ReservedCapacity=false",
}

// FlavorsMountPath is where the flavors ConfigMap is mounted; FLAVORS_CONFIG_PATH points at
// flavors.yaml inside it when settings.flavors is not empty.
const FlavorsMountPath = "/etc/karpenter/flavors"

// Values is everything a user may set when rendering the bundle.
type Values struct {
	// Settings configure the controller; each one becomes an environment variable of its
	// Deployment.
	Settings Settings `json:"settings"`
	// Namespace is where the controller, its ServiceAccount and its leader lease live.
	Namespace string `json:"namespace" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$,maxLength=63"`
	// Image is the controller image.
	Image Image `json:"image"`
	// Replicas of the controller. One leads; the others wait on the leader lease so a node
	// loss does not stop provisioning for long.
	Replicas int32 `json:"replicas" jsonschema:"minimum=0"`
	// RevisionHistoryLimit is how many old ReplicaSets to keep for rollbacks.
	RevisionHistoryLimit int32 `json:"revisionHistoryLimit" jsonschema:"minimum=0"`
	// Resources of the controller container.
	Resources corev1.ResourceRequirements `json:"resources"`
	// NodeSelector of the controller pods, empty by default: a hard selector added on top of
	// the affinity. A selector no node matches leaves every replica Pending (a control-plane
	// selector does on worker-only clusters).
	NodeSelector map[string]string `json:"nodeSelector"`
	// Affinity of the controller pods. The default requires nodes Karpenter does not manage
	// (no karpenter.sh/nodepool label), so consolidation never evicts the controller that
	// performs it, and prefers CKE's control-plane nodes where the cluster shows them. Setting
	// it replaces the default whole: keep the karpenter.sh/nodepool DoesNotExist term.
	Affinity corev1.Affinity `json:"affinity"`
	// Tolerations of the controller pods.
	Tolerations []corev1.Toleration `json:"tolerations"`
	// TopologySpreadConstraints of the controller pods. The bundle fills labelSelector with
	// the pods' own selector when it is left out.
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
	// PriorityClassName of the controller pods; an autoscaler that is evicted cannot bring
	// capacity back.
	PriorityClassName string `json:"priorityClassName"`
	// TerminationGracePeriodSeconds gives the leader time to release its lease on shutdown.
	TerminationGracePeriodSeconds int64 `json:"terminationGracePeriodSeconds" jsonschema:"minimum=0"`
	// PodDisruptionBudget of the controller pods.
	PodDisruptionBudget PodDisruptionBudget `json:"podDisruptionBudget"`
	// Service exposes the metrics port.
	Service Service `json:"service"`
	// ServiceMonitor is for the Prometheus operator; its CRD must exist when enabled.
	ServiceMonitor ServiceMonitor `json:"serviceMonitor"`
	// PrometheusRule holds the alerts on this provider's failure modes (docs/alerts.md), for
	// the Prometheus operator; its CRD must exist when enabled.
	PrometheusRule PrometheusRule `json:"prometheusRule"`
	// Dashboard is a Grafana dashboard in a ConfigMap that Grafana's dashboard sidecar
	// discovers by label.
	Dashboard Dashboard `json:"dashboard"`
	// NetworkPolicy restricts the controller's traffic to what it needs.
	NetworkPolicy NetworkPolicy `json:"networkPolicy"`
	// FlowSchemas place the controller's requests in the apiserver's API Priority and
	// Fairness: its leader Lease in the leader-election priority level, the rest in
	// workload-high, so that a busy apiserver does not starve the lease renewal (the leader
	// would exit and the next replica start from cold) nor queue the controller behind every
	// other service account.
	FlowSchemas FlowSchemas `json:"flowSchemas"`
	// ServiceAccount of the controller.
	ServiceAccount ServiceAccount `json:"serviceAccount"`
	// Labels added to every object of the bundle.
	Labels map[string]string `json:"labels"`
	// Annotations added to every object of the bundle.
	Annotations map[string]string `json:"annotations"`
	// PodLabels added to the controller pods.
	PodLabels map[string]string `json:"podLabels"`
	// PodAnnotations added to the controller pods.
	PodAnnotations map[string]string `json:"podAnnotations"`
	// ExtraEnv is appended to the controller's environment, e.g. for Karpenter core options
	// the settings do not cover. A variable a setting already sets is rejected.
	ExtraEnv []corev1.EnvVar `json:"extraEnv"`
}

// Settings are the controller's settings as the values spell them. Flavors replaces the
// binary's FLAVORS_CONFIG_PATH: the bundle renders the list into a ConfigMap and points the
// variable at it.
type Settings struct {
	settings.Settings
	// Flavors are per-flavor overrides laid over the base catalogue, added to the pins of
	// flavors/pins.cue; a flavor may be pinned once. With neither, the catalogue is used as is.
	Flavors []catalog.Override `json:"flavors"`
}

// Image names the controller image.
type Image struct {
	// Reference is the full image reference. The default ko:// path is resolved by `ko
	// resolve` or `ko apply`; a release pins a registry reference by digest.
	Reference string `json:"reference" jsonschema:"minLength=1"`
	// PullPolicy of the controller image.
	PullPolicy corev1.PullPolicy `json:"pullPolicy" jsonschema:"enum=Always,enum=IfNotPresent,enum=Never"`
	// PullSecrets are names of Secrets in the namespace holding registry credentials.
	PullSecrets []string `json:"pullSecrets"`
}

// PodDisruptionBudget bounds voluntary evictions of the controller pods.
type PodDisruptionBudget struct {
	// Enabled renders the PodDisruptionBudget.
	Enabled bool `json:"enabled"`
	// MaxUnavailable pods during voluntary disruptions, a count or a percentage.
	MaxUnavailable intstr.IntOrString `json:"maxUnavailable"`
}

// Service is the metrics Service.
type Service struct {
	// Annotations of the Service, e.g. for scrapers that discover by annotation.
	Annotations map[string]string `json:"annotations"`
}

// ServiceMonitor is a monitoring.coreos.com/v1 ServiceMonitor for the metrics Service.
type ServiceMonitor struct {
	// Enabled renders the ServiceMonitor.
	Enabled bool `json:"enabled"`
	// Interval between scrapes, as Prometheus spells durations.
	Interval string `json:"interval" jsonschema:"pattern=^([0-9]+(ms|s|m|h))+$"`
	// Labels the Prometheus instance selects ServiceMonitors by.
	Labels map[string]string `json:"labels"`
}

// PrometheusRule is a monitoring.coreos.com/v1 PrometheusRule with the provider's alerts.
type PrometheusRule struct {
	// Enabled renders the PrometheusRule.
	Enabled bool `json:"enabled"`
	// Labels the Prometheus instance selects rules by (its ruleSelector).
	Labels map[string]string `json:"labels"`
	// RunbookURL is the page each alert's runbook_url annotation points into, one anchor per
	// alert; point it at a copy of docs/alerts.md your on-call reads.
	RunbookURL string `json:"runbookURL" jsonschema:"pattern=^https?://"`
}

// Dashboard is the Grafana dashboard ConfigMap.
type Dashboard struct {
	// Enabled renders the ConfigMap.
	Enabled bool `json:"enabled"`
	// Namespace of the ConfigMap; empty puts it with the controller. Grafana's sidecar often
	// watches its own namespace only.
	Namespace string `json:"namespace" jsonschema:"pattern=^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$,maxLength=63"`
	// Labels added to the ConfigMap, beside grafana_dashboard: "1" which the sidecar
	// discovers dashboards by.
	Labels map[string]string `json:"labels"`
	// Folder is the Grafana folder the sidecar files the dashboard in (its grafana_folder
	// annotation); empty leaves it to the sidecar's default.
	Folder string `json:"folder"`
}

// FlowSchemas are the controller's API Priority and Fairness classification.
type FlowSchemas struct {
	// Enabled renders the two FlowSchemas (cluster-scoped; the priority levels they name are
	// the apiserver's own).
	Enabled bool `json:"enabled"`
}

// NetworkPolicy admits scrapes and probes in, and lets the controller reach the Kubernetes
// API, cluster DNS and, when pricing is enabled, Clever Cloud's price API.
type NetworkPolicy struct {
	// Enabled renders the NetworkPolicy.
	Enabled bool `json:"enabled"`
	// APIServer is where the Kubernetes API is reached from pods: its addresses and ports.
	APIServer NetworkPeer `json:"apiServer"`
	// PriceAPI is where Clever Cloud's public price API is reached; a NetworkPolicy cannot
	// name a host, so give its addresses (or an egress proxy's).
	PriceAPI NetworkPeer `json:"priceAPI"`
	// MetricsFrom are the peers allowed to scrape the metrics port; empty allows any.
	MetricsFrom []networkingv1.NetworkPolicyPeer `json:"metricsFrom"`
}

// NetworkPeer is a set of address blocks reached on a set of TCP ports.
type NetworkPeer struct {
	// CIDRs of the peer.
	CIDRs []string `json:"cidrs" jsonschema:"minItems=1"`
	// Ports of the peer, TCP.
	Ports []int32 `json:"ports" jsonschema:"minItems=1"`
}

// ServiceAccount of the controller.
type ServiceAccount struct {
	// Name of the ServiceAccount.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"`
	// Annotations of the ServiceAccount.
	Annotations map[string]string `json:"annotations"`
}
