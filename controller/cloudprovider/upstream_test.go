package cloudprovider_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	provider "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// upstreamGroup is a NodeGroup shaped as the upstream provider (v0.11/v0.12) launched it for
// claim: named after it, upstream's labels and hash stamp (version "" is v0.11's, without the
// version annotation), an owner reference without blockOwnerDeletion, and the claim's labels,
// karpenter.sh/nodepool included, in spec.labels.
func upstreamGroup(claim *karpv1.NodeClaim, class *v1alpha1.CleverNodeClass, flavor, hashVersion, hash string) *ngv1.NodeGroup {
	g := &ngv1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name: claim.Name,
			Labels: map[string]string{
				v1alpha1.UpstreamLabelManaged:  "true",
				v1alpha1.LabelNodeClaim:        claim.Name,
				v1alpha1.UpstreamLabelNodePool: claim.Labels[karpv1.NodePoolLabelKey],
				v1alpha1.LabelNodeClass:        class.Name,
			},
			Annotations:     map[string]string{v1alpha1.UpstreamAnnotationNodeClassHash: hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: claim.Name, UID: claim.UID}},
		},
		Spec: ngv1.NodeGroupSpec{
			Flavor: flavor, NodeCount: 1,
			Labels: map[string]string{karpv1.NodePoolLabelKey: claim.Labels[karpv1.NodePoolLabelKey], "workload": "web", "team": "platform"},
			Taints: []ngv1.Taint{{Key: karpv1.UnregisteredTaintKey, Effect: "NoExecute"}},
		},
	}
	if hashVersion != "" {
		g.Annotations[v1alpha1.UpstreamAnnotationNodeClassHashVersion] = hashVersion
	}
	return g
}

// Groups adopted from the upstream provider drift when, and only when, their class changes:
// whatever generation of upstream's hash stamped them, nothing drifts at switch-over.
func TestAdoptedUpstreamGroupsDriftOnAClassChangeOnly(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	ctx := context.Background()
	claims := map[string]*karpv1.NodeClaim{}
	// For a class whose labels upstream delivers, every generation's stamp is the same value
	// (the v1alpha1 tests prove each generation against this provider's Hash()).
	stamp := f.class.Hash()
	for _, version := range []string{"", "v2", "v3", "v9"} {
		nc := f.newClaim(g, "1", "1Gi")
		group := upstreamGroup(nc, f.class, "S", version, stamp)
		g.Expect(env.Client.Create(ctx, group)).To(Succeed())
		nc.Status.ProviderID = nodegroup.ProviderID(group.Name)
		claims[version] = nc
	}

	for version, nc := range claims {
		reason, err := f.provider.IsDrifted(ctx, nc)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reason).To(BeEmpty(), "hash version %q at switch-over", version)
	}
	events := drainEvents(f.events)
	g.Expect(events).To(ContainElement(And(ContainSubstring(provider.ReasonUpstreamHashUnknown), ContainSubstring(`"v9"`))))
	g.Expect(events).To(ContainElement(And(ContainSubstring(provider.ReasonLegacyLabels), ContainSubstring(karpv1.NodePoolLabelKey))))
	// Reported once, not on every drift check.
	_, err := f.provider.IsDrifted(ctx, claims["v9"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(drainEvents(f.events)).To(BeEmpty())

	f.class.Spec.Labels["team"] = "data"
	g.Expect(env.Client.Update(ctx, f.class)).To(Succeed())
	for version, nc := range claims {
		reason, err := f.provider.IsDrifted(ctx, nc)
		g.Expect(err).NotTo(HaveOccurred())
		if version == "v9" {
			g.Expect(reason).To(BeEmpty(), "an unknown generation proves nothing")
			continue
		}
		g.Expect(reason).To(Equal(provider.DriftReasonNodeClass), "hash version %q after a class change", version)
	}
}

// An adopted group is described, proven owned and deleted like one of ours.
func TestAdoptedUpstreamGroupsAreDescribedOwnedAndDeleted(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	ctx := context.Background()
	nc := f.newClaim(g, "1", "1Gi")
	group := upstreamGroup(nc, f.class, "S", "v2", f.class.Hash())
	g.Expect(env.Client.Create(ctx, group)).To(Succeed())
	nc.Status.ProviderID = nodegroup.ProviderID(group.Name)

	got, err := f.provider.Get(ctx, nc.Status.ProviderID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Name).To(Equal(nc.Name))
	g.Expect(got.Labels).To(HaveKeyWithValue(karpv1.NodePoolLabelKey, "pool"), "from upstream's object label")
	list, err := f.provider.List(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var ids []string
	for _, c := range list {
		ids = append(ids, c.Status.ProviderID)
	}
	g.Expect(ids).To(ContainElement(nc.Status.ProviderID))

	owner, err := nodegroup.ConfirmOwner(ctx, env.Client, group)
	g.Expect(err).NotTo(HaveOccurred(), "the provider-ID stamper's and the garbage collector's proof")
	g.Expect(owner.UID).To(Equal(nc.UID))
	g.Expect(nodegroup.OwnedSpecLabels(group)).To(Equal([]string{karpv1.NodePoolLabelKey}))

	g.Expect(f.provider.Delete(ctx, nc)).To(Succeed())
	err = env.Client.Get(ctx, client.ObjectKeyFromObject(group), group)
	g.Expect(err == nil && group.DeletionTimestamp != nil || client.IgnoreNotFound(err) == nil && err != nil).To(BeTrue(), "deleted: %v", err)
}
