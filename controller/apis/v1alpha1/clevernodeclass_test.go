package v1alpha1

import (
	"fmt"
	"testing"

	"github.com/awslabs/operatorpkg/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func classWith(labels map[string]LabelValue) *CleverNodeClass {
	return &CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: CleverNodeClassSpec{Labels: labels}}
}

func TestHashIsStableAcrossMapOrderAndEqualSpecs(t *testing.T) {
	g := NewWithT(t)
	// Build the same map many times with different insertion orders; Go also randomises
	// iteration order, so any order dependence shows up across iterations.
	keys := []string{}
	for i := range 40 {
		keys = append(keys, fmt.Sprintf("key-%02d", i))
	}
	want := ""
	for round := range 50 {
		m := map[string]LabelValue{}
		for i := range keys {
			k := keys[(i*7+round)%len(keys)]
			m[k] = LabelValue("v" + k)
		}
		h := classWith(m).Hash()
		if round == 0 {
			want = h
		}
		g.Expect(h).To(Equal(want), "round %d", round)
	}

	a := classWith(map[string]LabelValue{"team": "platform", "env": "prod"})
	b := classWith(map[string]LabelValue{"env": "prod", "team": "platform"})
	g.Expect(a.Hash()).To(Equal(b.Hash()))
	g.Expect(a.Hash()).To(Equal(a.Hash()))

	// Only the spec counts: metadata and status do not drift nodes.
	b.Name, b.Labels, b.ResourceVersion = "other", map[string]string{"x": "y"}, "42"
	b.Status.Conditions = []status.Condition{{Type: ConditionValidationSucceeded, Status: metav1.ConditionFalse}}
	g.Expect(b.Hash()).To(Equal(a.Hash()))
	g.Expect(a.Hash()).To(MatchRegexp(`^[0-9]+$`))
}

func TestHashDiffersForDifferentLabels(t *testing.T) {
	g := NewWithT(t)
	specs := []map[string]LabelValue{
		nil,
		{"team": "platform"},
		{"team": "payments"},
		{"group": "platform"},
		{"platform": "team"},
		{"team": "platform", "env": "prod"},
		{"team": ""},
		{"team2": ""},
	}
	seen := map[string]int{}
	for i, s := range specs {
		h := classWith(s).Hash()
		if j, dup := seen[h]; dup {
			t.Fatalf("spec %d %v hashes like spec %d %v: %s", i, s, j, specs[j], h)
		}
		seen[h] = i
	}
	g.Expect(seen).To(HaveLen(len(specs)))
}

func TestLabelMap(t *testing.T) {
	g := NewWithT(t)
	g.Expect(CleverNodeClassSpec{}.LabelMap()).To(BeNil())
	g.Expect(CleverNodeClassSpec{Labels: map[string]LabelValue{}}.LabelMap()).To(Equal(map[string]string{}))
	g.Expect(CleverNodeClassSpec{Labels: map[string]LabelValue{"a": "1", "b": ""}}.LabelMap()).
		To(Equal(map[string]string{"a": "1", "b": ""}))
}

func TestWellKnownLabelsIncludeTheProviderLabels(t *testing.T) {
	g := NewWithT(t)
	for _, l := range []string{
		"clever-cloud.com/flavor",
		"clever-cloud.com/cluster-node-role",
		"karpenter.clever-cloud.com/instance-cpu",
		"karpenter.clever-cloud.com/instance-memory",
	} {
		g.Expect(karpv1.WellKnownLabels.Has(l)).To(BeTrue(), l)
	}
	g.Expect(LabelInstanceCPU).To(Equal("karpenter.clever-cloud.com/instance-cpu"))
	g.Expect(LabelInstanceMemory).To(Equal("karpenter.clever-cloud.com/instance-memory"))
	// Ownership labels are bookkeeping on NodeGroups, not something pods select on.
	g.Expect(karpv1.WellKnownLabels.Has(LabelNodeClaim)).To(BeFalse())
	g.Expect(karpv1.WellKnownLabels.Has(LabelNodeClass)).To(BeFalse())
}

func TestRegisteredInTheGlobalScheme(t *testing.T) {
	g := NewWithT(t)
	gvks, _, err := scheme.Scheme.ObjectKinds(&CleverNodeClass{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gvks).To(ContainElement(GroupVersion.WithKind("CleverNodeClass")))
	g.Expect(GroupVersion.String()).To(Equal("karpenter.clever-cloud.com/v1alpha1"))
}

func TestReadyDependsOnValidationAndNodeGroupAPI(t *testing.T) {
	type state = metav1.ConditionStatus
	const (
		T = metav1.ConditionTrue
		F = metav1.ConditionFalse
		U = metav1.ConditionUnknown
	)
	set := func(cs status.ConditionSet, typ string, s state) {
		switch s {
		case T:
			cs.SetTrue(typ)
		case F:
			cs.SetFalse(typ, "Failed", "because")
		case U:
			cs.SetUnknown(typ)
		}
	}
	for _, tc := range []struct {
		validation, api state
		ready           state
	}{
		{T, T, T},
		{T, F, F},
		{F, T, F},
		{F, F, F},
		{T, U, U},
		{U, T, U},
		{U, U, U},
		{F, U, F},
	} {
		t.Run(fmt.Sprintf("validation=%s,api=%s", tc.validation, tc.api), func(t *testing.T) {
			g := NewWithT(t)
			nc := classWith(nil)
			cs := nc.StatusConditions()
			set(cs, ConditionValidationSucceeded, tc.validation)
			set(cs, ConditionNodeGroupAPIServed, tc.api)
			root := nc.StatusConditions().Root()
			g.Expect(root).NotTo(BeNil())
			g.Expect(root.Type).To(Equal("Ready"))
			g.Expect(root.Status).To(Equal(tc.ready))
			g.Expect(nc.StatusConditions().IsTrue("Ready")).To(Equal(tc.ready == T))
		})
	}
}

func TestReadyStartsUnknownAndIgnoresOtherConditions(t *testing.T) {
	g := NewWithT(t)
	nc := classWith(nil)
	cs := nc.StatusConditions()
	g.Expect(cs.Root().IsUnknown()).To(BeTrue())
	g.Expect(cs.IsDependentCondition(ConditionValidationSucceeded)).To(BeTrue())
	g.Expect(cs.IsDependentCondition(ConditionNodeGroupAPIServed)).To(BeTrue())
	g.Expect(cs.IsDependentCondition("SomethingInformational")).To(BeFalse())

	cs.SetTrue(ConditionValidationSucceeded)
	cs.SetTrue(ConditionNodeGroupAPIServed)
	cs.SetFalse("SomethingInformational", "Stale", "not a dependent")
	g.Expect(nc.StatusConditions().Root().IsTrue()).To(BeTrue())

	// The conditions live on the object's status.
	g.Expect(nc.GetConditions()).To(Equal(nc.Status.Conditions))
	types := []string{}
	for _, c := range nc.Status.Conditions {
		types = append(types, c.Type)
	}
	g.Expect(types).To(ContainElements("Ready", ConditionValidationSucceeded, ConditionNodeGroupAPIServed))
	nc.SetConditions(nil)
	g.Expect(nc.Status.Conditions).To(BeEmpty())
}

func TestDeepCopyIsIndependent(t *testing.T) {
	g := NewWithT(t)
	a := classWith(map[string]LabelValue{"a": "1"})
	a.Status.Conditions = []status.Condition{{Type: "Ready"}}
	b := a.DeepCopy()
	b.Spec.Labels["a"] = "2"
	b.Status.Conditions[0].Type = "X"
	g.Expect(a.Spec.Labels["a"]).To(Equal(LabelValue("1")))
	g.Expect(a.Status.Conditions[0].Type).To(Equal("Ready"))
	g.Expect(a.Hash()).NotTo(Equal(b.Hash()))
}

func TestNodeClassNameIsOnlyACleverNodeClassReference(t *testing.T) {
	g := NewWithT(t)
	claim := func(ref *karpv1.NodeClassReference) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{NodeClassRef: ref}}
	}
	name, ok := NodeClassName(claim(&karpv1.NodeClassReference{Group: Group, Kind: NodeClassKind, Name: "default"}))
	g.Expect(ok).To(BeTrue())
	g.Expect(name).To(Equal("default"))
	for _, ref := range []*karpv1.NodeClassReference{
		nil,
		{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		{Group: Group, Kind: "OtherClass", Name: "default"},
		{Group: "example.com", Kind: NodeClassKind, Name: "default"},
	} {
		_, ok := NodeClassName(claim(ref))
		g.Expect(ok).To(BeFalse(), "%+v", ref)
	}
}
