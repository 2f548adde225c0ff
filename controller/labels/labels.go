// Package labels is the one home of the rule on node label keys: which keys Karpenter, this
// provider or the CKE platform own, and which are the user's to set.
//
// The rule is one regular expression, OwnedKeyPattern, built here from the sources of truth
// (Karpenter's restricted domains and well-known labels, the NodeGroup API's reserved
// prefixes, the provider's API group). Every enforcement point derives from it:
//   - nodegroup.Build keeps only user labels in a NodeGroup's spec.labels (Check);
//   - the CleverNodeClass CRD refuses owned keys with CELRule (a test checks the generated CRD
//     spells exactly that rule);
//   - nodeclass.Validate marks a class admitted before that rule not Ready (Check);
//   - the CleverNodeClass JSON Schema forbids them with OwnedKeyPattern.
//
// The pattern is written with [.] rather than \. so that it reads the same in Go (RE2), in a
// CEL string literal, in YAML and in JSON Schema (ECMA-262) without any escaping.
package labels

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
)

// Owner is who sets a label key on CKE nodes.
type Owner int

// Owners of label keys.
const (
	// User keys are free: a NodePool template or a CleverNodeClass may set them.
	User Owner = iota
	// Platform keys are under a prefix the CKE NodeGroup API refuses in spec.labels
	// (kubernetes.io/, node.kubernetes.io/, clever-cloud.com/): the kubelet and CKE set them.
	Platform
	// Karpenter keys are in Karpenter's domain (karpenter.sh, e.g. karpenter.sh/nodepool), or
	// are the well-known labels Karpenter schedules on and copies from the NodeClaim onto the
	// node at registration (topology.kubernetes.io/zone and region), or their deprecated
	// aliases Karpenter normalises to them.
	Karpenter
	// Provider keys are in this provider's domain (karpenter.clever-cloud.com).
	Provider
)

func (o Owner) String() string {
	switch o {
	case User:
		return "the user"
	case Platform:
		return "the CKE platform"
	case Karpenter:
		return "Karpenter"
	case Provider:
		return "the Clever Cloud provider"
	}
	return fmt.Sprintf("Owner(%d)", int(o))
}

// why says, for an error message, where an owned key reaches the node from instead.
func (o Owner) why() string {
	switch o {
	case Platform:
		return "its prefix is reserved by the NodeGroup API (" + strings.Join(ngv1.ReservedLabelPrefixes, ", ") + ")"
	case Karpenter:
		return "Karpenter sets it on the node from the NodeClaim when the node registers"
	case Provider:
		return "the provider's domain " + v1alpha1.Group + " is reserved"
	}
	return ""
}

// part is one alternative of the owned-key pattern, with its owner.
type part struct {
	owner   Owner
	pattern string
	re      *regexp.Regexp
}

var (
	parts = ownedParts()
	// OwnedKeyPattern matches every label key that is not the user's to set.
	OwnedKeyPattern = ownedKeyPattern(parts)
	owned           = regexp.MustCompile(OwnedKeyPattern)
)

// ownedParts lists the owned keys, most specific owner first: a key under a reserved platform
// prefix is the platform's even when Karpenter also knows it (kubernetes.io/arch).
func ownedParts() []part {
	var ps []part
	add := func(o Owner, pattern string) {
		ps = append(ps, part{owner: o, pattern: pattern, re: regexp.MustCompile("^(" + pattern + ")")})
	}
	prefixes := make([]string, 0, len(ngv1.ReservedLabelPrefixes))
	for _, p := range ngv1.ReservedLabelPrefixes {
		prefixes = append(prefixes, quote(p))
	}
	add(Platform, strings.Join(prefixes, "|"))
	// Karpenter restricts its domains and every subdomain of them (IsRestrictedLabel).
	for _, d := range sets.List(karpv1.RestrictedLabelDomains) {
		add(Karpenter, "([^/]+[.])?"+quote(d)+"/")
	}
	add(Provider, "([^/]+[.])?"+quote(v1alpha1.Group)+"/")
	// Exact keys Karpenter owns that no domain above covers: its well-known labels (it copies
	// them from the NodeClaim at registration, and a class value would contradict the
	// scheduling simulation), their deprecated aliases and its restricted labels.
	exact := karpv1.WellKnownLabels.Union(karpv1.RestrictedLabels).Insert(slices.Collect(maps.Keys(karpv1.NormalizedLabels))...)
	var keys []string
	for _, k := range sets.List(exact) {
		if !coveredBy(ps, k) {
			keys = append(keys, quote(k))
		}
	}
	if len(keys) > 0 {
		add(Karpenter, "("+strings.Join(keys, "|")+")$")
	}
	return ps
}

func ownedKeyPattern(ps []part) string {
	alts := make([]string, 0, len(ps))
	for _, p := range ps {
		alts = append(alts, p.pattern)
	}
	return "^(" + strings.Join(alts, "|") + ")"
}

func coveredBy(ps []part, key string) bool {
	for _, p := range ps {
		if p.re.MatchString(key) {
			return true
		}
	}
	return false
}

// quote makes a literal key or prefix a pattern. Label keys and prefixes are made of
// [a-zA-Z0-9._/-] only, where only '.' is special; anything else is a programming error.
func quote(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._/-", r)) {
			panic(fmt.Sprintf("label key or prefix %q has a character the owned-key pattern cannot quote: %q", s, r))
		}
	}
	return strings.ReplaceAll(s, ".", "[.]")
}

// OwnerOf returns who owns a label key.
func OwnerOf(key string) Owner {
	if !owned.MatchString(key) {
		return User
	}
	for _, p := range parts {
		if p.re.MatchString(key) {
			return p.owner
		}
	}
	return User // unreachable: owned is the union of parts
}

// Check says whether a user may set key=value on a CKE node through a NodeGroup's spec.labels:
// the key must be a qualified name nobody else owns, and the value a valid label value. The
// error names the label and says why.
func Check(key, value string) error {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return fmt.Errorf("label key %q is invalid: %s", key, strings.Join(errs, "; "))
	}
	if o := OwnerOf(key); o != User {
		return fmt.Errorf("label %q is owned by %s and may not be set here: %s", key, o, o.why())
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return fmt.Errorf("label %q has an invalid value %q: %s", key, value, strings.Join(errs, "; "))
	}
	return nil
}

// CELRule is the CRD validation rule, on a map of labels, that refuses owned keys. The
// CleverNodeClass marker spells it out (markers cannot call Go); a test checks they agree.
func CELRule() string {
	return "self.all(k, !k.matches('" + OwnedKeyPattern + "'))"
}

// CELMessageExpression names the first owned key of a map CELRule refused.
func CELMessageExpression() string {
	return "'label ' + self.filter(k, k.matches('" + OwnedKeyPattern + "'))[0] + ' is owned by Karpenter, the provider or the CKE platform (" + ownedSummary + ")'"
}

// ownedSummary summarises the owned keys for users reading a refusal, from the same sources as
// the pattern; the exact keys are summarised by hand.
var ownedSummary = strings.Join(ngv1.ReservedLabelPrefixes, ", ") + ", " + strings.Join(sets.List(karpv1.RestrictedLabelDomains), ", ") +
	" and " + v1alpha1.Group + " domains, topology.kubernetes.io/zone and region, and the beta aliases Karpenter normalises"
