package nodeclass_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/labels"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

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
			class := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("invalid")}, Spec: v1alpha1.CleverNodeClassSpec{Labels: map[string]v1alpha1.LabelValue{label: value}}}
			err := env.Client.Create(ctx, class)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring("spec.labels"))
			// The CRD and the controller refuse the same keys, and the refusal names the label.
			g.Expect(labels.Check(label, string(value))).To(HaveOccurred())
			if labels.OwnerOf(label) != labels.User {
				g.Expect(err.Error()).To(ContainSubstring("label " + label + " is owned by"))
			}
		})
	}
	g := NewWithT(t)
	ok := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("valid")}, Spec: v1alpha1.CleverNodeClassSpec{Labels: map[string]v1alpha1.LabelValue{
		"team": "platform", "example.com/tier": "gold", "topology.kubernetes.io/rack": "r1", "empty": "",
		"notkarpenter.sh/x": "y", "my.clever-cloud.com/x": "y",
	}}}
	g.Expect(env.Client.Create(ctx, ok)).To(Succeed())
	for k, v := range ok.Spec.LabelMap() {
		g.Expect(labels.Check(k, v)).To(Succeed(), "the CRD admitted %s=%s, so the controller must too", k, v)
	}
}

func TestCleverNodeClassBecomesReadyAndWaitsForItsNodeClaims(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t, nil)
	class := env.NewClass(g, map[string]v1alpha1.LabelValue{"team": "platform"})
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(class), class)).To(Succeed())
		g.Expect(class.StatusConditions().Get(v1alpha1.ConditionValidationSucceeded).IsTrue()).To(BeTrue())
		g.Expect(class.StatusConditions().Get(v1alpha1.ConditionNodeGroupAPIServed).IsTrue()).To(BeTrue())
		g.Expect(class.StatusConditions().Get(status.ConditionReady).IsTrue()).To(BeTrue())
		g.Expect(class.Finalizers).To(ContainElement(v1alpha1.TerminationFinalizer))
	}).WithTimeout(testenv.Wait).Should(Succeed())

	nc := env.NewClaim(g, class.Name)
	g.Expect(env.Client.Delete(ctx, class)).To(Succeed())
	g.Consistently(func() error {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(class), &v1alpha1.CleverNodeClass{})
	}).WithTimeout(time.Second).Should(Succeed(), "a class in use must outlive its NodeClaims")

	g.Expect(env.Client.Delete(ctx, nc)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(class), &v1alpha1.CleverNodeClass{}))
	}).WithTimeout(testenv.Wait).Should(BeTrue())
}

// A class admitted before the CRD refused owned keys (an upgrade over existing objects) is not
// Ready, and says which label is at fault; removing the label makes it Ready again.
func TestCleverNodeClassWithAnOwnedLabelFromBeforeTheRuleIsNotReady(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startController(t, nil)
	crdClient := crdClient(g)
	restore := withoutOwnedKeyRule(g, crdClient)
	t.Cleanup(func() { restore(NewWithT(t)) })

	class := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("legacy")}, Spec: v1alpha1.CleverNodeClassSpec{Labels: map[string]v1alpha1.LabelValue{
		"topology.kubernetes.io/zone": "elsewhere", "team": "platform",
	}}}
	// The apiserver swaps in the relaxed schema asynchronously.
	g.Eventually(func() error { return env.Client.Create(ctx, class.DeepCopy()) }).WithTimeout(testenv.Wait).Should(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(class), class)).To(Succeed())
		c := class.StatusConditions().Get(v1alpha1.ConditionValidationSucceeded)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.IsFalse()).To(BeTrue())
		g.Expect(c.Message).To(ContainSubstring(`label "topology.kubernetes.io/zone" is owned by Karpenter`))
		g.Expect(c.Message).NotTo(ContainSubstring("team"))
		g.Expect(class.StatusConditions().Get(status.ConditionReady).IsFalse()).To(BeTrue())
	}).WithTimeout(testenv.Wait).Should(Succeed())

	restore(g) // the fix below must pass the real rule
	// The controller writes status concurrently, so the fix is applied to a fresh read until it
	// lands; a refusal other than a conflict fails at once.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(class), class)).To(Succeed())
		delete(class.Spec.Labels, "topology.kubernetes.io/zone")
		err := env.Client.Update(ctx, class)
		if err != nil && !apierrors.IsConflict(err) {
			StopTrying("the fix was refused").Wrap(err).Now()
		}
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(testenv.Wait).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(class), class)).To(Succeed())
		g.Expect(class.StatusConditions().Get(v1alpha1.ConditionValidationSucceeded).IsTrue()).To(BeTrue())
		g.Expect(class.StatusConditions().Get(status.ConditionReady).IsTrue()).To(BeTrue())
	}).WithTimeout(testenv.Wait).Should(Succeed())
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
	var original *apiextensionsv1.CustomResourceDefinitionSpec
	// The apiextensions controllers write the CRD's status, so the edit goes to a fresh read
	// until it lands.
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, key, crd)).To(Succeed())
		original = crd.Spec.DeepCopy()
		spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		field := spec.Properties["labels"]
		n := len(field.XValidations)
		field.XValidations = slices.DeleteFunc(field.XValidations, func(v apiextensionsv1.ValidationRule) bool { return v.Rule == labels.CELRule() })
		if len(field.XValidations) != n-1 {
			StopTrying("the served CRD does not carry the owned-key rule").Now()
		}
		spec.Properties["labels"] = field
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		err := c.Update(ctx, crd)
		if err != nil && !apierrors.IsConflict(err) {
			StopTrying("the relaxed CRD was refused").Wrap(err).Now()
		}
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(testenv.Wait).Should(Succeed())

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
		}).WithTimeout(testenv.Wait).Should(Succeed())
		probe := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("probe")}, Spec: v1alpha1.CleverNodeClassSpec{Labels: map[string]v1alpha1.LabelValue{"karpenter.sh/nodepool": "p"}}}
		g.Eventually(func() bool {
			err := env.Client.Create(ctx, probe.DeepCopy())
			if err == nil {
				_ = env.Client.Delete(ctx, probe.DeepCopy())
				return false
			}
			return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "is owned by")
		}).WithTimeout(testenv.Wait).Should(BeTrue(), "the apiserver enforces the owned-key rule again")
	}
}
