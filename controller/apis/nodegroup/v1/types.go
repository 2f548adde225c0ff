package v1

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Condition types and phases reported by the platform's node-group operator.
const (
	ConditionReady               = "Ready"
	ConditionReconcileInProgress = "ReconcileInProgress"
	ConditionReconcileFailed     = "ReconcileFailed"
	ConditionTerminating         = "Terminating"

	// Phases (status.phase is a free string; these are the values seen live).
	PhaseCreating      = "Creating"
	PhaseSynced        = "Synced"
	PhaseScaling       = "Scaling"
	PhaseQuotaExceeded = "QuotaExceeded"
	PhaseUpstreamError = "UpstreamError"

	// ReasonCreating is the ReconcileInProgress reason of an accepted group being built: the
	// operator's first write on a group it accepted.
	ReasonCreating = "Creating"
	// ReasonSynced is the Ready reason once the group's VMs exist.
	ReasonSynced = "Synced"
	// ReasonScaling is the ReconcileInProgress reason while a group's node count changes.
	ReasonScaling = "Scaling"
	// ReasonQuotaExceeded is the ReconcileFailed reason of a quota rejection. Its message is
	// empty on today's platform.
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonUpstreamError is the ReconcileFailed reason of a transient failure of Clever
	// Cloud's API; the operator retries on its own. Not a refusal.
	ReasonUpstreamError = "UpstreamError"
)

// SupportedFlavors is the served CRD's enum on spec.flavor: the apiserver refuses any other
// value with a 422.
var SupportedFlavors = []string{"2XS", "XS", "S", "M", "L", "XL"}

// DefaultFlavor is the served CRD's default for spec.flavor.
const DefaultFlavor = "M"

// Labels CKE puts on every worker node.
const (
	LabelNodeGroup       = "clever-cloud.com/nodegroup"
	LabelFlavor          = "clever-cloud.com/flavor"
	LabelClusterNodeRole = "clever-cloud.com/cluster-node-role"

	NodeRoleWorker       = "worker"
	NodeRoleControlPlane = "control-plane"
)

// ReservedLabelPrefixes are the label key prefixes the NodeGroup API refuses in spec.labels.
var ReservedLabelPrefixes = []string{"kubernetes.io/", "node.kubernetes.io/", "clever-cloud.com/"}

// MaxNodeCount is the largest spec.nodeCount the platform accepts.
const MaxNodeCount = 16

var (
	// GroupVersion is the API group and version of NodeGroup.
	GroupVersion = schema.GroupVersion{Group: "api.clever-cloud.com", Version: "v1"}
	// SchemeBuilder registers NodeGroup with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &NodeGroup{}, &NodeGroupList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds NodeGroup to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// NodeGroup is a set of identical CKE worker nodes of one flavor.
//
// +kubebuilder:object:root=true
type NodeGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeGroupSpec   `json:"spec,omitempty"`
	Status NodeGroupStatus `json:"status,omitempty"`
}

// NodeGroupSpec is what the provider asks of the platform.
type NodeGroupSpec struct {
	// Flavor is the catalogue name of the VM size, uppercase (2XS … XL). Immutable.
	Flavor string `json:"flavor"`
	// NodeCount is the number of nodes wanted, 0–16. The only mutable field.
	NodeCount int32 `json:"nodeCount"`
	// Labels are applied to every node of the group at join time. Immutable.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are applied to every node of the group at join time. Immutable.
	Taints []Taint `json:"taints,omitempty"`
}

// Taint is a node taint as the NodeGroup API spells it.
type Taint struct {
	Key    string             `json:"key"`
	Value  string             `json:"value,omitempty"`
	Effect corev1.TaintEffect `json:"effect"`
}

// NodeGroupStatus is what the platform reports. Every field is optional.
type NodeGroupStatus struct {
	Conditions      []metav1.Condition `json:"conditions,omitempty"`
	NodeCount       int32              `json:"nodeCount,omitempty"`
	TargetNodeCount int32              `json:"targetNodeCount,omitempty"`
	Phase           string             `json:"phase,omitempty"`
	UpstreamID      string             `json:"upstreamId,omitempty"`
	Labels          map[string]string  `json:"labels,omitempty"`
	Taints          []Taint            `json:"taints,omitempty"`
}

// NodeGroupList is a list of NodeGroups.
//
// +kubebuilder:object:root=true
type NodeGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeGroup `json:"items"`
}

// Condition returns the status condition of the given type, or nil.
func (g *NodeGroup) Condition(conditionType string) *metav1.Condition {
	for i := range g.Status.Conditions {
		if g.Status.Conditions[i].Type == conditionType {
			return &g.Status.Conditions[i]
		}
	}
	return nil
}

// NodeName is the name CKE gives to the i-th node of a group.
func NodeName(group string, i int) string {
	return group + "-node" + strconv.Itoa(i)
}
