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
// (ClaimOf, then OwnedBy, ConfirmOwner or ConfirmOrphan).
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
// such groups to the annotation). It is a claim, not a proof: ClaimOf and the confirmations
// built on it prove it.
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

// ErrNotOrphaned means a NodeGroup is not proven to have lost its NodeClaim: the claim lives,
// or the group changed, went or is going since it was read.
var ErrNotOrphaned = errors.New("nodegroup is not proven orphaned")

// Why a group is not proven owned, as events and metrics name it. Part of the product's
// interface: do not rename.
const (
	// ReasonNoOwnerClaim: the group names no NodeClaim UID.
	ReasonNoOwnerClaim = "NoOwnerClaim"
	// ReasonNotNamedForItsClaim: the group names a claim but is not named and labelled after
	// it, as a hand-copied, renamed manifest is.
	ReasonNotNamedForItsClaim = "NotNamedForItsClaim"
	// ReasonNotThisClaim: the group is shaped for another NodeClaim than the one acting on it.
	ReasonNotThisClaim = "NotThisClaim"
	// ReasonOwnerGone: no NodeClaim of that name and UID exists.
	ReasonOwnerGone = "OwnerGone"
)

// NotOwnedError says why a group is not proven owned. It is ErrNotOwned for errors.Is.
type NotOwnedError struct {
	Reason string
	err    error
}

func (e *NotOwnedError) Error() string { return e.err.Error() }

func (e *NotOwnedError) Unwrap() error { return e.err }

func notOwned(reason, format string, args ...any) error {
	return &NotOwnedError{Reason: reason, err: fmt.Errorf("%w: %s", ErrNotOwned, fmt.Sprintf(format, args...))}
}

// NotOwnedReason is the reason of an error from ClaimOf, OwnedBy, ConfirmOwner or
// ConfirmOrphan that proves a group is not owned, or "".
func NotOwnedReason(err error) string {
	var e *NotOwnedError
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// ClaimOf is the half of the ownership proof that needs no read, and the one every path that
// deletes a group or adopts its node starts with: the group names a NodeClaim by UID
// (OwnerClaim), and is named and labelled after that claim, as Build makes it. A manifest
// copied by hand keeps the labels and the annotation but cannot keep the name while the
// original exists (NodeGroups are cluster-scoped, names unique), so the copy names a claim
// that is not its own. It returns the claim, or a NotOwnedError.
func ClaimOf(g *ngv1.NodeGroup) (*Owner, error) {
	owner := OwnerClaim(g)
	switch {
	case owner == nil:
		return nil, notOwned(ReasonNoOwnerClaim, "no NodeClaim UID (annotation %s)", v1alpha1.AnnotationNodeClaimUID)
	case owner.Name != g.Name || g.Labels[v1alpha1.LabelNodeClaim] != g.Name:
		return nil, notOwned(ReasonNotNamedForItsClaim, "owner NodeClaim %q and label %s=%q do not both name the group", owner.Name, v1alpha1.LabelNodeClaim, g.Labels[v1alpha1.LabelNodeClaim])
	}
	return owner, nil
}

// OwnedBy proves, from a claim the caller holds (one Karpenter passed in, read live), that
// the group was launched for it: ClaimOf, naming that claim's name and UID.
func OwnedBy(g *ngv1.NodeGroup, claim *karpv1.NodeClaim) error {
	owner, err := ClaimOf(g)
	if err != nil {
		return err
	}
	if owner.Name != claim.Name || owner.UID != claim.UID {
		return notOwned(ReasonNotThisClaim, "the group names NodeClaim %q (UID %s), not %q (UID %s)", owner.Name, owner.UID, claim.Name, claim.UID)
	}
	return nil
}

// ConfirmOwner proves that a group was launched for Karpenter before anything acts on it as
// such: ClaimOf, then an uncached read through api finds that NodeClaim with that UID (a
// cache may still hold a claim that is gone, or miss one just created). It returns the
// claim, a NotOwnedError (ErrNotOwned) that says why the proof fails, or another error when
// the read itself failed.
func ConfirmOwner(ctx context.Context, api client.Reader, g *ngv1.NodeGroup) (*karpv1.NodeClaim, error) {
	owner, err := ClaimOf(g)
	if err != nil {
		return nil, err
	}
	claim, err := readClaim(ctx, api, g, owner)
	if err != nil {
		return nil, err
	}
	if claim == nil {
		return nil, notOwned(ReasonOwnerGone, "owner NodeClaim %q is gone", owner.Name)
	}
	if claim.UID != owner.UID {
		return nil, notOwned(ReasonOwnerGone, "NodeClaim %q has UID %s, the group names UID %s", owner.Name, claim.UID, owner.UID)
	}
	return claim, nil
}

// ConfirmOrphan proves, before garbage collection deletes a group, that it was launched for a
// NodeClaim that is gone: ClaimOf on the group as listed; an uncached re-read that finds the
// same object (UID), not terminating, still naming the same claim (a cached list may hold a
// group since deleted, replaced under its name, or re-annotated); and an uncached read that
// finds no NodeClaim of that name with that UID. It returns the re-read group, to be deleted
// with its UID and resourceVersion as preconditions so that nothing that changes it after
// the proof is deleted; or a NotOwnedError (refuse, loudly), an error wrapping ErrNotOrphaned
// (nothing to do), or another error when a read failed.
func ConfirmOrphan(ctx context.Context, api client.Reader, listed *ngv1.NodeGroup) (*ngv1.NodeGroup, *Owner, error) {
	owner, err := ClaimOf(listed)
	if err != nil {
		return nil, nil, err
	}
	fresh := &ngv1.NodeGroup{}
	if err := api.Get(ctx, client.ObjectKeyFromObject(listed), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("%w: nodegroup %q is gone", ErrNotOrphaned, listed.Name)
		}
		return nil, nil, fmt.Errorf("re-reading nodegroup %q: %w", listed.Name, err)
	}
	if fresh.UID != listed.UID {
		return nil, nil, fmt.Errorf("%w: nodegroup %q was replaced (UID %s, listed %s)", ErrNotOrphaned, listed.Name, fresh.UID, listed.UID)
	}
	if fresh.DeletionTimestamp != nil {
		return nil, nil, fmt.Errorf("%w: nodegroup %q is terminating", ErrNotOrphaned, listed.Name)
	}
	now, err := ClaimOf(fresh)
	if err != nil {
		return nil, nil, err
	}
	if *now != *owner {
		return nil, nil, fmt.Errorf("%w: nodegroup %q now names NodeClaim %q (UID %s), listed with %q (UID %s)", ErrNotOrphaned, listed.Name, now.Name, now.UID, owner.Name, owner.UID)
	}
	claim, err := readClaim(ctx, api, fresh, owner)
	if err != nil {
		return nil, nil, err
	}
	if claim != nil && claim.UID == owner.UID {
		return nil, nil, fmt.Errorf("%w: owner NodeClaim %q is alive", ErrNotOrphaned, owner.Name)
	}
	return fresh, owner, nil
}

// readClaim reads the claim a group names, uncached; nil when there is none of that name.
func readClaim(ctx context.Context, api client.Reader, g *ngv1.NodeGroup, owner *Owner) (*karpv1.NodeClaim, error) {
	claim := &karpv1.NodeClaim{}
	if err := api.Get(ctx, client.ObjectKey{Name: owner.Name}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading owner nodeclaim %q of nodegroup %q: %w", owner.Name, g.Name, err)
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
