package labels

import (
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/crds"
	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

func TestOwnerOf(t *testing.T) {
	for key, want := range map[string]Owner{
		// The NodeGroup API's reserved prefixes: kubelet and CKE labels.
		"kubernetes.io/hostname":             Platform,
		"kubernetes.io/arch":                 Platform,
		"node.kubernetes.io/instance-type":   Platform,
		"node.kubernetes.io/windows-build":   Platform,
		"clever-cloud.com/flavor":            Platform,
		"clever-cloud.com/nodegroup":         Platform,
		"clever-cloud.com/cluster-node-role": Platform,
		"clever-cloud.com/anything":          Platform,
		// Karpenter's domain and its subdomains, as IsRestrictedLabel reads them.
		"karpenter.sh/nodepool":       Karpenter,
		"karpenter.sh/capacity-type":  Karpenter,
		"karpenter.sh/registered":     Karpenter,
		"karpenter.sh/anything":       Karpenter,
		"sub.karpenter.sh/x":          Karpenter,
		"a.b.karpenter.sh/x":          Karpenter,
		"topology.kubernetes.io/zone": Karpenter,
		// Well-known keys Karpenter copies from the NodeClaim, and the aliases it normalises.
		"topology.kubernetes.io/region":            Karpenter,
		"failure-domain.beta.kubernetes.io/zone":   Karpenter,
		"failure-domain.beta.kubernetes.io/region": Karpenter,
		"beta.kubernetes.io/arch":                  Karpenter,
		"beta.kubernetes.io/os":                    Karpenter,
		"beta.kubernetes.io/instance-type":         Karpenter,
		// The provider's domain.
		"karpenter.clever-cloud.com/instance-cpu":     Provider,
		"karpenter.clever-cloud.com/clevernodeclass":  Provider,
		"karpenter.clever-cloud.com/nodeclaim":        Provider,
		"sub.karpenter.clever-cloud.com/x":            Provider,
		"karpenter.clever-cloud.com/not-yet-invented": Provider,
		// The user's: near misses included.
		"team":                                   User,
		"example.com/team":                       User,
		"topology.kubernetes.io/rack":            User,
		"topology.kubernetes.io/zone-group":      User,
		"my.topology.kubernetes.io/zone":         User,
		"example.kubernetes.io/x":                User,
		"my.clever-cloud.com/x":                  User,
		"clever-cloud.com":                       User,
		"notkarpenter.sh/x":                      User,
		"karpenter.shop/x":                       User,
		"karpenter.sh":                           User,
		"karpenter-sh/x":                         User,
		"karpenterxsh/x":                         User,
		"karpenter.clever-cloud.com.example/x":   User,
		"beta.kubernetes.io/arch-extra":          User,
		"failure-domain.beta.kubernetes.io/rack": User,
	} {
		NewWithT(t).Expect(OwnerOf(key)).To(Equal(want), "%q", key)
		// The one pattern the CRD and the JSON Schema use says the same.
		NewWithT(t).Expect(regexp.MustCompile(OwnedKeyPattern).MatchString(key)).To(Equal(want != User), "%q", key)
	}
}

// Karpenter's own sets are the source: a core upgrade that adds a well-known label, an alias
// or a restricted domain is picked up here, and the CRD test below flags the stale marker.
func TestEveryKeyKarpenterOwnsIsOwned(t *testing.T) {
	g := NewWithT(t)
	for k := range karpv1.WellKnownLabels {
		g.Expect(OwnerOf(k)).NotTo(Equal(User), "well-known label %s", k)
	}
	for k := range karpv1.NormalizedLabels {
		g.Expect(OwnerOf(k)).NotTo(Equal(User), "normalised alias %s", k)
	}
	for k := range karpv1.RestrictedLabels {
		g.Expect(OwnerOf(k)).NotTo(Equal(User), "restricted label %s", k)
	}
	for d := range karpv1.RestrictedLabelDomains {
		for _, k := range []string{d + "/x", "sub." + d + "/x"} {
			g.Expect(karpv1.IsRestrictedLabel(k)).To(HaveOccurred(), "Karpenter refuses %s", k)
			g.Expect(OwnerOf(k)).To(Equal(Karpenter), k)
		}
	}
	// What Karpenter sets on its own nodes at registration and initialisation.
	for _, k := range []string{karpv1.NodePoolLabelKey, karpv1.CapacityTypeLabelKey, karpv1.NodeRegisteredLabelKey, karpv1.NodeInitializedLabelKey, karpv1.NodeDoNotSyncTaintsLabelKey} {
		g.Expect(OwnerOf(k)).To(Equal(Karpenter), k)
	}
	for _, p := range ngv1.ReservedLabelPrefixes {
		g.Expect(OwnerOf(p+"x")).To(Equal(Platform), p)
	}
}

func TestCheck(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Check("team", "platform")).To(Succeed())
	g.Expect(Check("example.com/team", "")).To(Succeed())
	g.Expect(Check("team", strings.Repeat("v", 63))).To(Succeed())
	g.Expect(Check(strings.Repeat("k", 63), "v")).To(Succeed())

	for _, tc := range []struct{ key, value, says string }{
		{"topology.kubernetes.io/zone", "elsewhere", `label "topology.kubernetes.io/zone" is owned by Karpenter`},
		{"karpenter.sh/nodepool", "p", `label "karpenter.sh/nodepool" is owned by Karpenter`},
		{"karpenter.clever-cloud.com/x", "y", `label "karpenter.clever-cloud.com/x" is owned by the Clever Cloud provider`},
		{"clever-cloud.com/flavor", "M", `label "clever-cloud.com/flavor" is owned by the CKE platform`},
		{"kubernetes.io/hostname", "n", "reserved by the NodeGroup API"},
		{"team", "has space", `label "team" has an invalid value "has space"`},
		{"team", strings.Repeat("v", 64), `label "team" has an invalid value`},
		{strings.Repeat("k", 64), "v", "is invalid"},
		{"", "v", `label key "" is invalid`},
		{"bad key!", "v", `label key "bad key!" is invalid`},
		{"Example.com/x", "v", "is invalid"},
		{"a/b/c", "v", "is invalid"},
	} {
		err := Check(tc.key, tc.value)
		g.Expect(err).To(HaveOccurred(), "%q=%q", tc.key, tc.value)
		g.Expect(err.Error()).To(ContainSubstring(tc.says), "%q=%q", tc.key, tc.value)
	}
}

// The CRD spells out the rule (markers cannot call Go): it must be exactly this package's.
func TestCleverNodeClassCRDSpellsTheOwnedKeyRule(t *testing.T) {
	g := NewWithT(t)
	crd := crds.CleverNodeClass()
	g.Expect(crd.Spec.Versions).To(HaveLen(1))
	labels := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["labels"]
	var rules []string
	for _, v := range labels.XValidations {
		rules = append(rules, v.Rule)
		if v.Rule == CELRule() {
			g.Expect(v.MessageExpression).To(Equal(CELMessageExpression()),
				"the CleverNodeClass spec.labels marker is stale: run make generate (hack/celmarker writes it)")
		}
	}
	g.Expect(rules).To(ContainElement(CELRule()),
		"the owned-key XValidation marker on CleverNodeClassSpec.Labels is stale (want rule=%q): run make generate (hack/celmarker writes it)", CELRule())
}

// The pattern must mean the same to RE2 (Go, CEL) and ECMA-262 (JSON Schema): it keeps to the
// common subset, and needs no escaping in a CEL or JSON string.
func TestOwnedKeyPatternIsPortable(t *testing.T) {
	g := NewWithT(t)
	g.Expect(OwnedKeyPattern).To(HavePrefix("^("))
	g.Expect(OwnedKeyPattern).NotTo(ContainSubstring(`\`))
	g.Expect(OwnedKeyPattern).NotTo(ContainSubstring(`'`))
	g.Expect(OwnedKeyPattern).NotTo(ContainSubstring(`"`))
	g.Expect(OwnedKeyPattern).NotTo(ContainSubstring(`(?`))
	g.Expect(regexp.MustCompile(OwnedKeyPattern).String()).To(Equal(OwnedKeyPattern))
}

func TestOwnerString(t *testing.T) {
	g := NewWithT(t)
	g.Expect(User.String()).To(Equal("the user"))
	g.Expect(Karpenter.String()).To(Equal("Karpenter"))
	g.Expect(Owner(42).String()).To(Equal("Owner(42)"))
}

// Whatever Check accepts, the NodeGroup API accepts in spec.labels, and Karpenter neither
// owns nor refuses on a NodePool template.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{"team", "example.com/team", "karpenter.sh/nodepool", "sub.karpenter.sh/x",
		"topology.kubernetes.io/zone", "topology.kubernetes.io/rack", "kubernetes.io/os", "clever-cloud.com/flavor",
		"karpenter.clever-cloud.com/x", "a/b/c", "", "beta.kubernetes.io/os"} {
		f.Add(seed, "v")
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		if Check(key, value) != nil {
			return
		}
		for _, p := range ngv1.ReservedLabelPrefixes {
			if strings.HasPrefix(key, p) {
				t.Fatalf("Check accepted %q under the NodeGroup API's reserved prefix %q", key, p)
			}
		}
		if len(validation.IsQualifiedName(key)) > 0 || len(validation.IsValidLabelValue(value)) > 0 {
			t.Fatalf("Check accepted an invalid label %q=%q", key, value)
		}
		if karpv1.WellKnownLabels.Has(key) || karpv1.IsRestrictedLabel(key) != nil {
			t.Fatalf("Check accepted %q, which Karpenter owns", key)
		}
	})
}
