// Package nodegroup owns the lifecycle of the NodeGroups the provider launches: building the
// object from a NodeClaim, creating or adopting it, waiting for the platform's verdict and
// deleting it.
package nodegroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/karpenter/pkg/apis"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/labels"
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
// anything destructive, or that makes Karpenter adopt a node, must also prove ownership
// (OwnerClaim, ConfirmOwner).
func IsManaged(g *ngv1.NodeGroup) bool {
	return g.Labels[v1alpha1.LabelNodeClaim] != ""
}

// Owner names the NodeClaim a group claims to be launched for.
type Owner struct {
	Name string
	UID  types.UID
}

// OwnerClaim returns the NodeClaim a group claims to be launched for, or nil: the claim UID
// annotation with the group's nodeclaim label, or else an owner reference to a NodeClaim (how
// the upstream provider and this provider's earlier versions recorded it; MigrateOwner moves
// such groups to the annotation). It is a claim, not a proof: ConfirmOwner proves it.
func OwnerClaim(g *ngv1.NodeGroup) *Owner {
	if uid := g.Annotations[v1alpha1.AnnotationNodeClaimUID]; uid != "" {
		return &Owner{Name: g.Labels[v1alpha1.LabelNodeClaim], UID: types.UID(uid)}
	}
	if ref := LegacyOwnerReference(g); ref != nil {
		return &Owner{Name: ref.Name, UID: ref.UID}
	}
	return nil
}

// LegacyOwnerReference returns a group's owner reference to a NodeClaim, if any. Such a
// reference lets Kubernetes' garbage collector delete the group, and so the VM, as soon as
// the claim is deleted with foreground propagation, before Karpenter drains the node.
func LegacyOwnerReference(g *ngv1.NodeGroup) *metav1.OwnerReference {
	for i, ref := range g.OwnerReferences {
		if ref.Kind == "NodeClaim" && strings.HasPrefix(ref.APIVersion, apis.Group+"/") {
			return &g.OwnerReferences[i]
		}
	}
	return nil
}

// ErrNotOwned means a NodeGroup is not proven to be launched for a live NodeClaim.
var ErrNotOwned = errors.New("nodegroup is not owned by a live NodeClaim")

// ConfirmOwner proves that a group was launched for Karpenter before anything acts on it as
// such: it names a NodeClaim by UID (OwnerClaim), it is named and labelled after that claim
// (Build's shape: a hand-copied manifest cannot reuse the name, so copying the UID too is not
// enough), and an uncached read through api finds that NodeClaim with that UID (a cache may
// still hold a claim that is gone, or miss one just created). It returns the claim, an error
// wrapping ErrNotOwned that says why the proof fails, or another error when the read itself
// failed.
func ConfirmOwner(ctx context.Context, api client.Reader, g *ngv1.NodeGroup) (*karpv1.NodeClaim, error) {
	owner := OwnerClaim(g)
	switch {
	case owner == nil:
		return nil, fmt.Errorf("%w: no NodeClaim UID (annotation %s)", ErrNotOwned, v1alpha1.AnnotationNodeClaimUID)
	case owner.Name != g.Name || g.Labels[v1alpha1.LabelNodeClaim] != g.Name:
		return nil, fmt.Errorf("%w: owner NodeClaim %q and label %s=%q do not both name the group", ErrNotOwned, owner.Name, v1alpha1.LabelNodeClaim, g.Labels[v1alpha1.LabelNodeClaim])
	}
	claim := &karpv1.NodeClaim{}
	if err := api.Get(ctx, client.ObjectKey{Name: owner.Name}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: owner NodeClaim %q is gone", ErrNotOwned, owner.Name)
		}
		return nil, fmt.Errorf("reading owner nodeclaim %q of nodegroup %q: %w", owner.Name, g.Name, err)
	}
	if claim.UID != owner.UID {
		return nil, fmt.Errorf("%w: NodeClaim %q has UID %s, the group names UID %s", ErrNotOwned, owner.Name, claim.UID, owner.UID)
	}
	return claim, nil
}

// Build is the NodeGroup for a NodeClaim of a flavor: named after the claim, one node, stamped
// with the claim's UID (no owner reference: see AnnotationNodeClaimUID), labelled for ownership (object labels, never copied to nodes), stamped with the
// class hash, and carrying the user labels and the taints its node must have from the moment
// it joins.
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
				v1alpha1.AnnotationNodeClaimUID:         string(claim.UID),
			},
		},
		Spec: ngv1.NodeGroupSpec{
			Flavor:    flavor,
			NodeCount: 1,
			Labels:    nodeLabels,
			Taints:    taints,
		},
	}
}

// NodeLabels is a NodeGroup's spec.labels: the claim's labels merged with the class's (the
// class wins), keeping only user labels (labels.Check). CKE copies spec.labels onto every node
// of the group, including nodes added by an out-of-band resize, so a key Karpenter, the
// provider or the platform owns must never be there: karpenter.sh/nodepool on such an extra
// node, which has no NodeClaim, wedges Karpenter core's cluster state. Owned labels still
// reach the node: Karpenter copies the NodeClaim's labels (zone, region, instance type,
// capacity type, node pool…) onto it when it registers. User labels are kept here so that
// they are on the node from the moment it joins, before registration, for DaemonSets and
// other selectors.
func NodeLabels(claimLabels, classLabels map[string]string) map[string]string {
	out := map[string]string{}
	add := func(m map[string]string) {
		for k, v := range m {
			if labels.Check(k, v) == nil {
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

// OwnedSpecLabels lists, sorted, the keys of a group's spec.labels that Karpenter, the provider
// or the platform own (labels.Check). Build never writes one; a group launched by the upstream
// provider carries karpenter.sh/nodepool there, for as long as it lives (spec.labels is
// immutable).
func OwnedSpecLabels(g *ngv1.NodeGroup) []string {
	var out []string
	for k, v := range g.Spec.Labels {
		if labels.Check(k, v) != nil {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
