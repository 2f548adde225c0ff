package v1alpha1

import (
	"fmt"
	"strings"

	"github.com/mitchellh/hashstructure/v2"
	"k8s.io/apimachinery/pkg/util/validation"
)

// What the public upstream provider (CleverCloud/karpenter-provider-clever-cloud up to v0.12,
// Helm-installed) writes on the NodeGroups it launches. A cluster switched over in place keeps
// those groups running; this provider adopts them (same name as the NodeClaim, the same
// /nodeclaim and /nodeclass labels, an owner reference to the NodeClaim, which garbage
// collection moves to AnnotationNodeClaimUID) and needs these keys only to evaluate their drift
// and to describe them.
const (
	// UpstreamAnnotationNodeClassHash is the drift stamp upstream writes at creation.
	UpstreamAnnotationNodeClassHash = Group + "/clevernodeclass-hash"
	// UpstreamAnnotationNodeClassHashVersion names the generation of upstream's hash that
	// produced the stamp; absent means v1 (up to v0.11).
	UpstreamAnnotationNodeClassHashVersion = Group + "/clevernodeclass-hash-version"
	// UpstreamLabelManaged marks every group upstream manages ("true").
	UpstreamLabelManaged = Group + "/managed"
	// UpstreamLabelNodePool is the object label upstream records the NodePool in (this
	// provider uses karpenter.sh/nodepool).
	UpstreamLabelNodePool = Group + "/nodepool"
)

// UpstreamHashMatches says whether hash, stamped on an adopted NodeGroup by the given
// generation of upstream's hash (the value of UpstreamAnnotationNodeClassHashVersion, "" for
// v1), still describes this class's current spec. It compares like with like: the stamp is
// checked against what that same generation computes for today's spec, so a mismatch means
// the class changed since the group was built, never that the hashing schemes differ.
//
// known is false for a generation this provider cannot reproduce (a later upstream's): such a
// stamp proves nothing either way, and the caller must not report drift from it.
//
// Upstream's generations, as shipped (all hashstructure FormatV2 with SlicesAsSets,
// IgnoreZeroValue and ZeroNil over a struct type named CleverNodeClassSpec whose only field is
// Labels map[string]string; hashstructure hashes the type's name and field names, and a
// string-kinded value by its bytes, so LabelValue hashes as a string does):
//   - v1 (annotation absent, up to v0.11): the raw spec, where `labels: {}` and no labels hash
//     differently. Both are the same configuration, so an empty spec matches either.
//   - v2 (v0.12.0): the spec with an empty label map normalised to nil. It equals this
//     provider's own Hash() for the same labels (a test proves it).
//   - v3 (after v0.12.0): v2 over the labels upstream still delivers to nodes, leaving out the
//     keys its later validation rejects (any kubernetes.io/ domain, clever-cloud.com/, the
//     karpenter.sh domain, invalid keys or values).
func (in *CleverNodeClass) UpstreamHashMatches(version, hash string) (match, known bool) {
	labels := in.Spec.LabelMap()
	var candidates []string
	switch version {
	case "", "v1":
		if len(labels) == 0 {
			candidates = []string{upstreamHash(nil), upstreamHash(map[string]string{})}
		} else {
			candidates = []string{upstreamHash(labels)}
		}
	case "v2":
		candidates = []string{upstreamHash(normalised(labels))}
	case "v3":
		delivered := map[string]string{}
		for k, v := range labels {
			if upstreamDelivers(k, v) {
				delivered[k] = v
			}
		}
		candidates = []string{upstreamHash(normalised(delivered))}
	default:
		return false, false
	}
	for _, c := range candidates {
		if c == hash {
			return true, true
		}
	}
	return false, true
}

func normalised(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	return labels
}

// upstreamHash hashes labels the way every upstream generation does, over upstream's spec
// shape. The local type keeps upstream's name on purpose: hashstructure mixes it in.
func upstreamHash(labels map[string]string) string {
	type CleverNodeClassSpec struct {
		Labels map[string]string
	}
	h, err := hashstructure.Hash(CleverNodeClassSpec{Labels: labels}, hashstructure.FormatV2,
		&hashstructure.HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true})
	if err != nil {
		// A struct of a string map cannot fail to hash.
		panic(fmt.Sprintf("hashing an upstream CleverNodeClass spec: %v", err))
	}
	return fmt.Sprint(h)
}

// upstreamDelivers is upstream's later rule for a class label it puts on nodes (and hashes in
// generation v3).
func upstreamDelivers(key, value string) bool {
	switch {
	case strings.Contains(key, "kubernetes.io/"),
		strings.HasPrefix(key, "clever-cloud.com/"),
		strings.HasPrefix(key, "karpenter.sh/"),
		strings.Contains(key, ".karpenter.sh/"):
		return false
	}
	return len(validation.IsQualifiedName(key)) == 0 && len(validation.IsValidLabelValue(value)) == 0
}
