package v1alpha1

import (
	"fmt"

	"github.com/awslabs/operatorpkg/status"
	"github.com/mitchellh/hashstructure/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// NodeClassKind is the kind a NodeClaim's nodeClassRef names to be built from a
// CleverNodeClass.
const NodeClassKind = "CleverNodeClass"

func metav1AddToGroupVersion(s *runtime.Scheme) { metav1.AddToGroupVersion(s, GroupVersion) }

// CleverNodeClassSpec describes how the provider builds CKE nodes for the NodePools that
// reference this class.
type CleverNodeClassSpec struct {
	// The owned-key rule below is controller/labels.CELRule and CELMessageExpression, spelled
	// out because markers cannot call Go; controller/labels' tests fail when they disagree.

	// Labels are extra node labels set on the NodeGroup, so CKE applies them when the node
	// joins, before Karpenter registers it. Keys must be qualified names that nobody else owns:
	// not under the prefixes the NodeGroup API reserves (kubernetes.io/, node.kubernetes.io/,
	// clever-cloud.com/), not in Karpenter's domain (karpenter.sh and its subdomains) nor this
	// provider's (karpenter.clever-cloud.com and its subdomains), and none of the well-known
	// labels Karpenter sets from the NodeClaim at registration (topology.kubernetes.io/zone and
	// region, and the beta aliases it normalises). Values must be valid label values. Changing
	// them drifts the nodes built from this class.
	//
	// +kubebuilder:validation:MaxProperties=64
	// +hack:celmarker
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^(kubernetes[.]io/|node[.]kubernetes[.]io/|clever-cloud[.]com/|([^/]+[.])?karpenter[.]sh/|([^/]+[.])?karpenter[.]clever-cloud[.]com/|(beta[.]kubernetes[.]io/arch|beta[.]kubernetes[.]io/instance-type|beta[.]kubernetes[.]io/os|failure-domain[.]beta[.]kubernetes[.]io/region|failure-domain[.]beta[.]kubernetes[.]io/zone|topology[.]kubernetes[.]io/region|topology[.]kubernetes[.]io/zone)$)'))",messageExpression="'label ' + self.filter(k, k.matches('^(kubernetes[.]io/|node[.]kubernetes[.]io/|clever-cloud[.]com/|([^/]+[.])?karpenter[.]sh/|([^/]+[.])?karpenter[.]clever-cloud[.]com/|(beta[.]kubernetes[.]io/arch|beta[.]kubernetes[.]io/instance-type|beta[.]kubernetes[.]io/os|failure-domain[.]beta[.]kubernetes[.]io/region|failure-domain[.]beta[.]kubernetes[.]io/zone|topology[.]kubernetes[.]io/region|topology[.]kubernetes[.]io/zone)$)'))[0] + ' is owned by Karpenter, the provider or the CKE platform (kubernetes.io/, node.kubernetes.io/, clever-cloud.com/, karpenter.sh and karpenter.clever-cloud.com domains, topology.kubernetes.io/zone and region, and the beta aliases Karpenter normalises)'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$') && (k.contains('/') ? (k.split('/')[0].size() <= 253 && k.split('/')[1].size() <= 63) : k.size() <= 63))",message="label keys must be qualified names: an optional DNS subdomain prefix of at most 253 characters and '/', then a name of at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
	// +optional
	Labels map[string]LabelValue `json:"labels,omitempty"`
}

// LabelValue is a Kubernetes label value: at most 63 alphanumerics, '-', '_' or '.', starting
// and ending with an alphanumeric, or empty. A named type so the CRD can constrain map values
// with a pattern instead of a CEL rule too costly for the apiserver's budget.
//
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// CleverNodeClass is the Karpenter NodeClass of Clever Kubernetes Engine.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clevernodeclasses,scope=Cluster,categories=karpenter,shortName={cnc,cncs}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type CleverNodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CleverNodeClassSpec   `json:"spec,omitempty"`
	Status CleverNodeClassStatus `json:"status,omitempty"`
}

// NodeClassName returns the name of the CleverNodeClass a NodeClaim is built from, and false
// when the claim references none: no nodeClassRef, or another provider's class.
func NodeClassName(claim *karpv1.NodeClaim) (string, bool) {
	ref := claim.Spec.NodeClassRef
	if ref == nil || ref.Group != Group || ref.Kind != NodeClassKind {
		return "", false
	}
	return ref.Name, true
}

// CleverNodeClassList is a list of CleverNodeClasses.
//
// +kubebuilder:object:root=true
type CleverNodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CleverNodeClass `json:"items"`
}

// Hash is the drift fingerprint of the spec: NodeGroups record it at creation, and a
// different value later means the node no longer matches its class.
func (in *CleverNodeClass) Hash() string {
	// SlicesAsSets/ZeroNil keep the hash stable across semantically equal specs.
	spec := in.Spec
	if len(spec.Labels) == 0 {
		spec.Labels = nil // "labels: {}" and no labels are the same class
	}
	h, err := hashstructure.Hash(spec, hashstructure.FormatV2, &hashstructure.HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true})
	if err != nil {
		// The spec is plain data; hashstructure fails only on unsupported kinds (chan, func).
		panic(fmt.Sprintf("hashing CleverNodeClass spec: %v", err))
	}
	return fmt.Sprint(h)
}

// Condition types of a CleverNodeClass. Ready is true when both are.
const (
	// ConditionValidationSucceeded is true when the spec is usable as is.
	ConditionValidationSucceeded = "ValidationSucceeded"
	// ConditionNodeGroupAPIServed is true when the cluster serves nodegroups.api.clever-cloud.com/v1.
	ConditionNodeGroupAPIServed = "NodeGroupAPIServed"
	// ConditionPricesCurrent says whether the price refresher keeps prices current. It is
	// informational and not part of Ready: stale prices never stop provisioning.
	ConditionPricesCurrent = "PricesCurrent"
)

// CleverNodeClassStatus is the observed state of a CleverNodeClass.
type CleverNodeClassStatus struct {
	// Conditions say whether the class can be used to launch nodes, and if not, why.
	// +optional
	Conditions []status.Condition `json:"conditions,omitempty"`
}

// StatusConditions returns the condition set whose root, Ready, depends on every other condition.
func (in *CleverNodeClass) StatusConditions(opts ...status.ForOption) status.ConditionSet {
	return status.NewReadyConditions(ConditionValidationSucceeded, ConditionNodeGroupAPIServed).For(in, opts...)
}

// GetConditions implements status.Object.
func (in *CleverNodeClass) GetConditions() []status.Condition { return in.Status.Conditions }

// SetConditions implements status.Object.
func (in *CleverNodeClass) SetConditions(conditions []status.Condition) {
	in.Status.Conditions = conditions
}

// LabelMap returns the spec's labels as plain strings.
func (s CleverNodeClassSpec) LabelMap() map[string]string {
	if s.Labels == nil {
		return nil
	}
	out := make(map[string]string, len(s.Labels))
	for k, v := range s.Labels {
		out[k] = string(v)
	}
	return out
}
