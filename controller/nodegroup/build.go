// Package nodegroup owns the lifecycle of the NodeGroups the provider launches: building the
// object from a NodeClaim, creating or adopting it, waiting for the platform's verdict and
// deleting it.
package nodegroup

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/karpenter/pkg/apis"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
)

// ProviderID is the provider ID of the node of a one-node group.
func ProviderID(group string) string { return v1alpha1.ProviderIDPrefix + group }

// GroupName extracts the NodeGroup name from a provider ID, or "" when it is not ours.
func GroupName(providerID string) string {
	name, ok := strings.CutPrefix(providerID, v1alpha1.ProviderIDPrefix)
	if !ok {
		return ""
	}
	return name
}

// IsManaged says whether a NodeGroup carries the provider's labels. It is enough for reads;
// anything destructive must also check ownership (OwnerClaim).
func IsManaged(g *ngv1.NodeGroup) bool {
	return g.Labels[v1alpha1.LabelNodeClaim] != ""
}

// OwnerClaim returns the owner reference to a NodeClaim, if any: the proof that a group was
// launched for Karpenter and not hand-copied with our labels.
func OwnerClaim(g *ngv1.NodeGroup) *metav1.OwnerReference {
	for i, ref := range g.OwnerReferences {
		if ref.Kind == "NodeClaim" && strings.HasPrefix(ref.APIVersion, apis.Group+"/") {
			return &g.OwnerReferences[i]
		}
	}
	return nil
}

// Build is the NodeGroup for a NodeClaim of a flavor: named after the claim, one node, owned
// by the claim, labelled for ownership, stamped with the class hash, and carrying the labels
// and taints its node must have from the moment it joins.
func Build(claim *karpv1.NodeClaim, class *v1alpha1.CleverNodeClass, flavor string) *ngv1.NodeGroup {
	objectLabels := map[string]string{
		v1alpha1.LabelNodeClaim: claim.Name,
		v1alpha1.LabelNodeClass: class.Name,
	}
	if pool := claim.Labels[karpv1.NodePoolLabelKey]; pool != "" {
		objectLabels[karpv1.NodePoolLabelKey] = pool
	}
	nodeLabels := NodeLabels(claim.Labels, class.Spec.LabelMap())
	taints := []ngv1.Taint{{Key: karpv1.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}}
	for _, t := range append(append([]corev1.Taint(nil), claim.Spec.Taints...), claim.Spec.StartupTaints...) {
		if t.Key == karpv1.UnregisteredTaintKey {
			continue
		}
		taints = append(taints, ngv1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	return &ngv1.NodeGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: ngv1.GroupVersion.String(), Kind: "NodeGroup"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   claim.Name,
			Labels: objectLabels,
			Annotations: map[string]string{
				v1alpha1.AnnotationNodeClassHash:        class.Hash(),
				v1alpha1.AnnotationNodeClassHashVersion: v1alpha1.NodeClassHashVersion,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         apis.Group + "/v1",
				Kind:               "NodeClaim",
				Name:               claim.Name,
				UID:                claim.UID,
				BlockOwnerDeletion: ptr(true),
			}},
		},
		Spec: ngv1.NodeGroupSpec{
			Flavor:    flavor,
			NodeCount: 1,
			Labels:    nodeLabels,
			Taints:    taints,
		},
	}
}

// Labels Karpenter sets itself once the node registers; stamping them at join time would lie.
var karpenterRuntimeLabels = map[string]bool{
	karpv1.NodeRegisteredLabelKey:  true,
	karpv1.NodeInitializedLabelKey: true,
}

// NodeLabels merges the claim's labels with the class's (the class wins) and keeps only what
// the NodeGroup API admits: no reserved prefix, valid keys and values. Dropped labels still
// reach the node: Karpenter syncs the claim's labels at registration.
func NodeLabels(claimLabels, classLabels map[string]string) map[string]string {
	out := map[string]string{}
	add := func(m map[string]string) {
		for k, v := range m {
			if Admissible(k, v) && !karpenterRuntimeLabels[k] {
				out[k] = v
			}
		}
	}
	add(claimLabels)
	add(classLabels)
	if len(out) == 0 {
		return nil
	}
	return out
}

// Admissible says whether the NodeGroup API accepts a label.
func Admissible(key, value string) bool {
	for _, p := range ngv1.ReservedLabelPrefixes {
		if strings.HasPrefix(key, p) {
			return false
		}
	}
	return len(validation.IsQualifiedName(key)) == 0 && len(validation.IsValidLabelValue(value)) == 0
}

func ptr[T any](v T) *T { return &v }
