package controllers_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/awslabs/operatorpkg/status"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/providerid"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/labels"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// notStamped waits for the stamper's refusal event about a group, so that "never stamped" is
// asserted after the stamper has looked at the node and decided, not after a guessed delay.
// seen keeps every event drained so far: one wait must not lose the event another waits for.
func notStamped(g Gomega, seen *[]string, group, says string) {
	g.Eventually(func() []string {
		*seen = append(*seen, drain(events.Events)...)
		return *seen
	}).WithTimeout(wait).Should(ContainElement(SatisfyAll(
		ContainSubstring(providerid.ReasonNotStamped), ContainSubstring("NodeGroup "+group+" "), ContainSubstring(says))))
}

// A provider ID makes Karpenter adopt a node, so the stamper asks for the same proof as the
// destructive paths: the UID of a NodeClaim that an uncached read finds alive.
func TestProviderIDNeedsProofOfOwnership(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := newClass(g, nil)
	claim := newClaim(g, class.Name)
	owned := nodegroup.Build(claim, class, "S")

	// Hand-copied manifests of a managed group, under another name (a name is unique): one
	// without the claim UID, one that kept it and so points at a live claim.
	noOwner := owned.DeepCopy()
	noOwner.Name = name("copied")
	delete(noOwner.Annotations, v1alpha1.AnnotationNodeClaimUID)
	keptOwner := owned.DeepCopy()
	keptOwner.Name = name("copied")
	for _, copied := range []*ngv1.NodeGroup{noOwner, keptOwner} {
		g.Expect(kube.Create(ctx, copied)).To(Succeed())
	}
	g.Expect(kube.Create(ctx, owned)).To(Succeed())
	copiedNode := newNode(g, ngv1.NodeName(noOwner.Name, 0), noOwner.Name, "S", nil)
	keptNode := newNode(g, ngv1.NodeName(keptOwner.Name, 0), keptOwner.Name, "S", nil)
	ownedNode := newNode(g, ngv1.NodeName(owned.Name, 0), owned.Name, "S", nil)

	g.Eventually(providerIDOf(g, ownedNode.Name)).WithTimeout(wait).Should(Equal("clevercloud://" + owned.Name))
	var seen []string
	notStamped(g, &seen, noOwner.Name, "no NodeClaim UID")
	notStamped(g, &seen, keptOwner.Name, "do not both name the group")
	g.Expect(providerIDOf(g, copiedNode.Name)()).To(BeEmpty())
	g.Expect(providerIDOf(g, keptNode.Name)()).To(BeEmpty())

	// A group whose owner claim is gone is an orphan for garbage collection, not a node to adopt.
	gone := newClaim(g, class.Name)
	orphan := nodegroup.Build(gone, class, "S")
	g.Expect(kube.Create(ctx, orphan)).To(Succeed())
	g.Expect(kube.Delete(ctx, gone)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(kube.Get(ctx, client.ObjectKeyFromObject(gone), gone))
	}).WithTimeout(wait).Should(BeTrue())
	orphanNode := newNode(g, ngv1.NodeName(orphan.Name, 0), orphan.Name, "S", nil)
	notStamped(g, &seen, orphan.Name, "is gone")
	g.Expect(providerIDOf(g, orphanNode.Name)()).To(BeEmpty())
}

// A class admitted before the CRD refused owned keys (an upgrade over existing objects) is not
// Ready, and says which label is at fault; removing the label makes it Ready again.
func TestCleverNodeClassWithAnOwnedLabelFromBeforeTheRuleIsNotReady(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	crdClient := crdClient(g)
	restore := withoutOwnedKeyRule(g, crdClient)
	t.Cleanup(func() { restore(NewWithT(t)) })

	class := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name("legacy")}, Spec: v1alpha1.CleverNodeClassSpec{Labels: map[string]v1alpha1.LabelValue{
		"topology.kubernetes.io/zone": "elsewhere", "team": "platform",
	}}}
	// The apiserver swaps in the relaxed schema asynchronously.
	g.Eventually(func() error { return kube.Create(ctx, class.DeepCopy()) }).WithTimeout(wait).Should(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(class), class)).To(Succeed())
		c := class.StatusConditions().Get(v1alpha1.ConditionValidationSucceeded)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.IsFalse()).To(BeTrue())
		g.Expect(c.Message).To(ContainSubstring(`label "topology.kubernetes.io/zone" is owned by Karpenter`))
		g.Expect(c.Message).NotTo(ContainSubstring("team"))
		g.Expect(class.StatusConditions().Get(status.ConditionReady).IsFalse()).To(BeTrue())
	}).WithTimeout(wait).Should(Succeed())

	restore(g) // the fix below must pass the real rule
	delete(class.Spec.Labels, "topology.kubernetes.io/zone")
	g.Expect(kube.Update(ctx, class)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(kube.Get(ctx, client.ObjectKeyFromObject(class), class)).To(Succeed())
		g.Expect(class.StatusConditions().Get(v1alpha1.ConditionValidationSucceeded).IsTrue()).To(BeTrue())
		g.Expect(class.StatusConditions().Get(status.ConditionReady).IsTrue()).To(BeTrue())
	}).WithTimeout(wait).Should(Succeed())
}

func crdClient(g Gomega) client.Client {
	s := runtime.NewScheme()
	g.Expect(apiextensionsv1.AddToScheme(s)).To(Succeed())
	c, err := client.New(env.Config, client.Options{Scheme: s})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// withoutOwnedKeyRule removes the owned-key rule from the served CleverNodeClass CRD, as it
// was before the rule existed, and returns a function that puts it back (idempotent) and waits
// until the apiserver enforces it again, so later tests see the real CRD.
func withoutOwnedKeyRule(g Gomega, c client.Client) func(Gomega) {
	ctx := context.Background()
	key := client.ObjectKey{Name: "clevernodeclasses." + v1alpha1.Group}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(c.Get(ctx, key, crd)).To(Succeed())
	original := crd.Spec.DeepCopy()
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	field := spec.Properties["labels"]
	n := len(field.XValidations)
	field.XValidations = slices.DeleteFunc(field.XValidations, func(v apiextensionsv1.ValidationRule) bool { return v.Rule == labels.CELRule() })
	g.Expect(field.XValidations).To(HaveLen(n-1), "the served CRD carries the owned-key rule")
	spec.Properties["labels"] = field
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	g.Expect(c.Update(ctx, crd)).To(Succeed())

	restored := false
	return func(g Gomega) {
		if restored {
			return
		}
		restored = true
		g.Eventually(func() error {
			if err := c.Get(ctx, key, crd); err != nil {
				return err
			}
			crd.Spec = *original
			return c.Update(ctx, crd)
		}).WithTimeout(wait).Should(Succeed())
		probe := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name("probe")}, Spec: v1alpha1.CleverNodeClassSpec{Labels: map[string]v1alpha1.LabelValue{"karpenter.sh/nodepool": "p"}}}
		g.Eventually(func() bool {
			err := kube.Create(ctx, probe.DeepCopy())
			if err == nil {
				_ = kube.Delete(ctx, probe.DeepCopy())
				return false
			}
			return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "is owned by")
		}).WithTimeout(wait).Should(BeTrue(), "the apiserver enforces the owned-key rule again")
	}
}
