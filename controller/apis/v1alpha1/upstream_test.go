package v1alpha1

import (
	"testing"

	. "github.com/onsi/gomega"
)

// Upstream's v2 stamp is this provider's Hash() for the same labels: the two schemes agree,
// so an adopted group is judged exactly as one of ours.
func TestUpstreamV2StampIsOurHash(t *testing.T) {
	g := NewWithT(t)
	for _, labels := range []map[string]LabelValue{nil, {}, {"team": "platform"}, {"team": "platform", "example.com/rev": "one"}} {
		class := classWith(labels)
		match, known := class.UpstreamHashMatches("v2", class.Hash())
		g.Expect(known).To(BeTrue())
		g.Expect(match).To(BeTrue(), "labels %v", labels)
	}
}

func TestUpstreamStampsMatchOnlyTheSpecTheyWereBuiltFrom(t *testing.T) {
	g := NewWithT(t)
	built := classWith(map[string]LabelValue{"team": "platform"})
	changed := classWith(map[string]LabelValue{"team": "payments"})
	for _, version := range []string{"", "v1", "v2", "v3"} {
		stamp := upstreamStamp(t, built, version)
		match, known := built.UpstreamHashMatches(version, stamp)
		g.Expect(known).To(BeTrue(), version)
		g.Expect(match).To(BeTrue(), "version %q: same spec", version)
		match, known = changed.UpstreamHashMatches(version, stamp)
		g.Expect(known).To(BeTrue(), version)
		g.Expect(match).To(BeFalse(), "version %q: changed spec drifts", version)
	}
}

// v1 hashed `labels: {}` and no labels differently; both are the same configuration, so
// dropping a no-op `labels: {}` after the switch drifts nothing.
func TestUpstreamV1EmptyLabelsMatchEitherSpelling(t *testing.T) {
	g := NewWithT(t)
	g.Expect(upstreamHash(nil)).NotTo(Equal(upstreamHash(map[string]string{})), "v1 really did tell them apart")
	for _, stamp := range []string{upstreamHash(nil), upstreamHash(map[string]string{})} {
		for _, labels := range []map[string]LabelValue{nil, {}} {
			match, known := classWith(labels).UpstreamHashMatches("", stamp)
			g.Expect(known).To(BeTrue())
			g.Expect(match).To(BeTrue())
		}
	}
	match, _ := classWith(map[string]LabelValue{"team": "platform"}).UpstreamHashMatches("", upstreamHash(nil))
	g.Expect(match).To(BeFalse())
}

// v3 leaves out the keys upstream stopped delivering: adding or removing one drifts nothing
// under v3, while v2 (which hashed them) sees the change.
func TestUpstreamV3IgnoresUndeliveredKeys(t *testing.T) {
	g := NewWithT(t)
	plain := classWith(map[string]LabelValue{"team": "platform"})
	extra := classWith(map[string]LabelValue{"team": "platform", "app.kubernetes.io/part-of": "shop"})
	stamp := upstreamHash(map[string]string{"team": "platform"})
	match, known := extra.UpstreamHashMatches("v3", stamp)
	g.Expect(known).To(BeTrue())
	g.Expect(match).To(BeTrue())
	match, _ = extra.UpstreamHashMatches("v2", stamp)
	g.Expect(match).To(BeFalse())
	match, _ = plain.UpstreamHashMatches("v2", stamp)
	g.Expect(match).To(BeTrue())
}

// A generation this provider cannot reproduce proves nothing either way.
func TestUpstreamUnknownGenerationIsNotKnown(t *testing.T) {
	class := classWith(nil)
	match, known := class.UpstreamHashMatches("v9", class.Hash())
	NewWithT(t).Expect([]bool{match, known}).To(Equal([]bool{false, false}))
}

// The stamp each upstream generation wrote for class, computed independently of
// UpstreamHashMatches' own branches.
func upstreamStamp(t *testing.T, class *CleverNodeClass, version string) string {
	t.Helper()
	labels := class.Spec.LabelMap()
	switch version {
	case "", "v1":
		return upstreamHash(labels)
	case "v2", "v3": // class has only delivered labels here
		if len(labels) == 0 {
			labels = nil
		}
		return upstreamHash(labels)
	}
	t.Fatalf("no upstream generation %q", version)
	return ""
}
