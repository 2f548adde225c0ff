package controllers_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/providerid"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/labels"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

const wait = 15 * time.Second

var seq atomic.Int32

func name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

func newClass(g Gomega, labels map[string]v1alpha1.LabelValue) *v1alpha1.CleverNodeClass {
	class := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name("class")}, Spec: v1alpha1.CleverNodeClassSpec{Labels: labels}}
	g.Expect(kube.Create(context.Background(), class)).To(Succeed())
	return class
}

func newClaim(g Gomega, class string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name("claim"), Labels: map[string]string{karpv1.NodePoolLabelKey: "pool"}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: v1alpha1.Group, Kind: "CleverNodeClass", Name: class},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
		},
	}
	g.Expect(kube.Create(context.Background(), nc)).To(Succeed())
	return nc
}

func newNode(g Gomega, nodeName, group, flavor string, extra map[string]string) *corev1.Node {
	labels := map[string]string{ngv1.LabelNodeGroup: group, ngv1.LabelFlavor: flavor, ngv1.LabelClusterNodeRole: ngv1.NodeRoleWorker}
	for k, v := range extra {
		labels[k] = v
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: labels}}
	g.Expect(kube.Create(context.Background(), node)).To(Succeed())
	return node
}

func providerIDOf(g Gomega, nodeName string) func() string {
	return func() string {
		node := &corev1.Node{}
		g.Expect(kube.Get(context.Background(), client.ObjectKey{Name: nodeName}, node)).To(Succeed())
		return node.Spec.ProviderID
	}
}

func TestCleverNodeClassCRDRejectsLabelsTheNodeGroupAPIWouldRefuse(t *testing.T) {
	ctx := context.Background()
	for label, value := range map[string]v1alpha1.LabelValue{
		"kubernetes.io/hostname":             "x",
		"node.kubernetes.io/instance-type":   "M",
		"clever-cloud.com/flavor":            "M",
		"karpenter.sh/nodepool":              "p",
		"karpenter.sh/capacity-type":         "spot",
		"sub.karpenter.sh/x":                 "y",
		"karpenter.clever-cloud.com/managed": "yes",
		// Karpenter sets these from the NodeClaim at registration; a class must not contradict it.
		"topology.kubernetes.io/zone":            "elsewhere",
		"topology.kubernetes.io/region":          "elsewhere",
		"failure-domain.beta.kubernetes.io/zone": "elsewhere",
		"beta.kubernetes.io/arch":                "arm64",
		"bad key":                                "x",
		"team":                                   "not a valid value",
		"long":                                   v1alpha1.LabelValue(fmt.Sprintf("%064d", 0)),
	} {
		t.Run(label, func(t *testing.T) {
			g := NewWithT(t)
			class := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name("invalid")}, Spec: v1alpha1.CleverNodeClassSpec{Labels: map[string]v1alpha1.LabelValue{label: value}}}
			err := kube.Create(ctx, class)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring("spec.labels"))
			// The CRD and the controller refuse the same keys, and the refusal names the label.
			g.Expect(labels.Check(label, string(value))).To(HaveOccurred())
			if labels.IsOwned(label) {
				g.Expect(err.Error()).To(ContainSubstring("label " + label + " is owned by"))
			}
		})
	}
	g := NewWithT(t)
	ok := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name("valid")}, Spec: v1alpha1.CleverNodeClassSpec{Labels: map[string]v1alpha1.LabelValue{
		"team": "platform", "example.com/tier": "gold", "topology.kubernetes.io/rack": "r1", "empty": "",
		"notkarpenter.sh/x": "y", "my.clever-cloud.com/x": "y",
	}}}
	g.Expect(kube.Create(ctx, ok)).To(Succeed())
	for k, v := range ok.Spec.LabelMap() {
		g.Expect(labels.Check(k, v)).To(Succeed(), "the CRD admitted %s=%s, so the controller must too", k, v)
	}
}

func TestCleverNodeClassBecomesReadyAndWaitsForItsNodeClaims(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := newClass(g, map[string]v1alpha1.LabelValue{"team": "platform"})
	g.Eventually(func(g Gomega) {
		g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(class), class)).To(Succeed())
		g.Expect(class.StatusConditions().Get(v1alpha1.ConditionValidationSucceeded).IsTrue()).To(BeTrue())
		g.Expect(class.StatusConditions().Get(v1alpha1.ConditionNodeGroupAPIServed).IsTrue()).To(BeTrue())
		g.Expect(class.StatusConditions().Get(status.ConditionReady).IsTrue()).To(BeTrue())
		g.Expect(class.Finalizers).To(ContainElement(v1alpha1.TerminationFinalizer))
	}).WithTimeout(wait).Should(Succeed())

	nc := newClaim(g, class.Name)
	g.Expect(kube.Delete(ctx, class)).To(Succeed())
	g.Consistently(func() error {
		return kube.Get(ctx, client.ObjectKeyFromObject(class), &v1alpha1.CleverNodeClass{})
	}).WithTimeout(time.Second).Should(Succeed(), "a class in use must outlive its NodeClaims")

	g.Expect(kube.Delete(ctx, nc)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(kube.Get(ctx, client.ObjectKeyFromObject(class), &v1alpha1.CleverNodeClass{}))
	}).WithTimeout(wait).Should(BeTrue())
}

func TestProviderIDIsStampedOnNode0OfAManagedOneNodeGroupOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := newClass(g, nil)

	// The node may join before the provider's cache sees its group: the group's arrival retries.
	nc := newClaim(g, class.Name)
	group := nodegroup.Build(nc, class, "S")
	node := newNode(g, ngv1.NodeName(group.Name, 0), group.Name, "S", nil)
	g.Consistently(providerIDOf(g, node.Name)).WithTimeout(500 * time.Millisecond).Should(BeEmpty())
	g.Expect(kube.Create(ctx, group)).To(Succeed())
	g.Eventually(providerIDOf(g, node.Name)).WithTimeout(wait).Should(Equal("clevercloud://" + group.Name))

	// Resized by hand to two nodes: neither node gets an ID, so no ID ever names two nodes.
	nc2 := newClaim(g, class.Name)
	resized := nodegroup.Build(nc2, class, "S")
	resized.Spec.NodeCount = 2
	g.Expect(kube.Create(ctx, resized)).To(Succeed())
	n0 := newNode(g, ngv1.NodeName(resized.Name, 0), resized.Name, "S", nil)
	n1 := newNode(g, ngv1.NodeName(resized.Name, 1), resized.Name, "S", nil)
	var seen []string
	g.Eventually(func() []string {
		seen = append(seen, drain(events.Events)...)
		return seen
	}).WithTimeout(wait).Should(ContainElement(ContainSubstring(providerid.ReasonNotStamped)))
	g.Expect(providerIDOf(g, n0.Name)()).To(BeEmpty())
	g.Expect(providerIDOf(g, n1.Name)()).To(BeEmpty())

	// A pool the provider did not launch is not its business.
	manual := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name("manual")}, Spec: ngv1.NodeGroupSpec{Flavor: "S", NodeCount: 1}}
	g.Expect(kube.Create(ctx, manual)).To(Succeed())
	m0 := newNode(g, ngv1.NodeName(manual.Name, 0), manual.Name, "S", nil)
	g.Consistently(providerIDOf(g, m0.Name)).WithTimeout(time.Second).Should(BeEmpty())
}

func TestCapacityIsLearnedFromKarpenterNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	node := newNode(g, name("learn"), name("group"), "L", map[string]string{karpv1.NodePoolLabelKey: "pool"})
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("12"), corev1.ResourceMemory: resource.MustParse("23000000Ki")}
	g.Expect(kube.Status().Update(ctx, node)).To(Succeed())
	g.Eventually(func() int64 {
		it, _ := flavors.Get("L")
		return it.Capacity.Memory().Value()
	}).WithTimeout(wait).Should(Equal(int64(23000000 * 1024)))
}

func TestGarbageCollection(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := newClass(g, nil)

	alive := newClaim(g, class.Name)
	kept := nodegroup.Build(alive, class, "S")
	gone := newClaim(g, class.Name)
	orphan := nodegroup.Build(gone, class, "S")
	lookalike := nodegroup.Build(newClaim(g, class.Name), class, "S")
	lookalike.Name = name("copied")
	delete(lookalike.Annotations, v1alpha1.AnnotationNodeClaimUID)
	for _, o := range []*ngv1.NodeGroup{kept, orphan, lookalike} {
		g.Expect(kube.Create(ctx, o)).To(Succeed())
	}
	g.Expect(kube.Delete(ctx, gone)).To(Succeed())

	// Within the grace period a group whose claim is not visible yet is left alone.
	g.Expect(gc.Collect(ctx)).To(Succeed())
	g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(orphan), orphan)).To(Succeed())

	gcClock.Step(time.Minute)
	g.Expect(gc.Collect(ctx)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(kube.Get(ctx, client.ObjectKeyFromObject(orphan), &ngv1.NodeGroup{}))
	}).WithTimeout(wait).Should(BeTrue(), "a group whose owner NodeClaim is gone is reaped")
	g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(kept), kept)).To(Succeed())
	g.Expect(kept.DeletionTimestamp).To(BeNil())
	g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(lookalike), lookalike)).To(Succeed())
	g.Expect(lookalike.DeletionTimestamp).To(BeNil(), "a group that names no NodeClaim UID is never deleted")
}

// Groups launched by the upstream provider or by earlier versions of this one name their claim
// in an owner reference, which lets Kubernetes' garbage collector delete the group (and the
// VM) as soon as the claim is deleted with foreground propagation, before the drain. A pass
// moves them to the claim UID annotation, keeping the same claim and every other owner.
func TestGarbageCollectionMigratesOwnerReferences(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := newClass(g, nil)
	claim := newClaim(g, class.Name)
	legacy := nodegroup.Build(claim, class, "S")
	delete(legacy.Annotations, v1alpha1.AnnotationNodeClaimUID)
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep-me", UID: "cm-uid"}
	legacy.OwnerReferences = []metav1.OwnerReference{
		other,
		{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: claim.Name, UID: claim.UID, BlockOwnerDeletion: ptr.To(true)},
	}
	g.Expect(kube.Create(ctx, legacy)).To(Succeed())

	g.Expect(gc.Collect(ctx)).To(Succeed())
	got := &ngv1.NodeGroup{}
	g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(legacy), got)).To(Succeed())
	g.Expect(got.OwnerReferences).To(Equal([]metav1.OwnerReference{other}), "only the NodeClaim reference goes")
	g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClaimUID, string(claim.UID)))
	g.Expect(got.DeletionTimestamp).To(BeNil())
	proven, err := nodegroup.ConfirmOwner(ctx, kube, got)
	g.Expect(err).NotTo(HaveOccurred(), "still provably the claim's after the move")
	g.Expect(proven.UID).To(Equal(claim.UID))

	// A second pass has nothing left to move and changes nothing.
	g.Expect(gc.Collect(ctx)).To(Succeed())
	again := &ngv1.NodeGroup{}
	g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(legacy), again)).To(Succeed())
	g.Expect(again.ResourceVersion).To(Equal(got.ResourceVersion))
}

func TestLaunchedClaimWhoseGroupVanishedIsFastFailed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := newClass(g, nil)
	nc := newClaim(g, class.Name)
	nc.Status.ProviderID = nodegroup.ProviderID(nc.Name) // its group never made it, or vanished
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	g.Expect(kube.Status().Update(ctx, nc)).To(Succeed())

	registered := newClaim(g, class.Name)
	registered.Status.ProviderID = nodegroup.ProviderID(registered.Name)
	registered.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	registered.StatusConditions().SetTrue(karpv1.ConditionTypeRegistered)
	g.Expect(kube.Status().Update(ctx, registered)).To(Succeed())

	g.Expect(gc.Collect(ctx)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(kube.Get(ctx, client.ObjectKeyFromObject(nc), &karpv1.NodeClaim{}))
	}).WithTimeout(wait).Should(BeTrue())
	g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(registered), registered)).To(Succeed(), "registered claims are core's to judge")
}

func TestQuotaUsageCountsControlPlaneAndEveryLiveGroup(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	before := func() quota.Usage { h, _ := tracker.Headroom(); return h }()

	cp := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name("control-plane"), Labels: map[string]string{
		ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane, ngv1.LabelFlavor: "S"}}}
	g.Expect(kube.Create(ctx, cp)).To(Succeed())
	pool := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name("pool")}, Spec: ngv1.NodeGroupSpec{Flavor: "XS", NodeCount: 2}}
	g.Expect(kube.Create(ctx, pool)).To(Succeed())
	refused := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name("refused")}, Spec: ngv1.NodeGroupSpec{Flavor: "XL", NodeCount: 1}}
	g.Expect(kube.Create(ctx, refused)).To(Succeed())
	refused.Status.Phase = ngv1.PhaseQuotaExceeded
	g.Expect(kube.Status().Update(ctx, refused)).To(Succeed())

	// S (8 vCPU / 12 GB) + 2 × XS (6 / 8): 20 vCPU / 28 GB more; the refused XL holds nothing.
	g.Eventually(func() quota.Usage { h, _ := tracker.Headroom(); return h }).WithTimeout(wait).
		Should(Equal(quota.Usage{CPU: before.CPU - 20, GB: before.GB - 28}))
}
