package cloudprovider_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/labels"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// Zone, region, instance type and capacity type reach the node from the NodeClaim the provider
// describes (Karpenter copies its labels at registration), never from the group's spec.labels,
// which hold only user labels and which the served NodeGroup CRD accepts.
func TestNodeClaimLabelsComeFromTheFlavorAndTheGroupOnlyCarriesUserLabels(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, g, time.Minute)
	claim := f.newClaim(g, "1", "1Gi")
	claim.Labels[corev1.LabelTopologyRegion] = "par"
	built := nodegroup.Build(claim, f.class, "S")
	for k := range built.Spec.Labels {
		g.Expect(labels.OwnerOf(k)).To(Equal(labels.User), "spec.labels[%s]", k)
	}
	g.Expect(built.Spec.Labels).To(Equal(map[string]string{"team": "platform", "workload": "web"}))
	g.Expect(env.Client.Create(ctx, built)).To(Succeed())

	// A group built before owned keys were kept out, from a class that set a zone of its own.
	legacy := nodegroup.Build(f.newClaim(g, "1", "1Gi"), f.class, "S")
	legacy.Spec.Labels = map[string]string{"team": "platform", karpv1.NodePoolLabelKey: "pool", corev1.LabelTopologyZone: "elsewhere"}
	g.Expect(env.Client.Create(ctx, legacy)).To(Succeed())

	for _, group := range []string{built.Name, legacy.Name} {
		nc, err := f.provider.Get(ctx, nodegroup.ProviderID(group))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nc.Labels).To(SatisfyAll(
			HaveKeyWithValue(corev1.LabelTopologyZone, "par"),
			HaveKeyWithValue(corev1.LabelTopologyRegion, "par"),
			HaveKeyWithValue(corev1.LabelInstanceTypeStable, "S"),
			HaveKeyWithValue(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeOnDemand),
			HaveKeyWithValue(corev1.LabelArchStable, "amd64"),
			HaveKeyWithValue(corev1.LabelOSStable, "linux"),
			HaveKeyWithValue(karpv1.NodePoolLabelKey, "pool"), // from the group's own labels
			HaveKeyWithValue("team", "platform"),
		), group)
	}
}
