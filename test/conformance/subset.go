package conformance

import (
	"regexp"
	"slices"
	"strings"
)

// SubsetSpec names one spec of the CI subset by its suite and full text (containers and leaf).
type SubsetSpec struct {
	Suite string
	Text  string
}

// Subset is what `make test` runs of core's suites (TestConformanceSubset): per area the
// spec that catches the most for its time on the fast profile. Expiration is left to
// `make conformance`: its specs wait for a 3-minute expireAfter (the e2e suite's expiry
// scenario covers it in `make test`).
var Subset = []SubsetSpec{
	// NodeClaim lifecycle: launch, register, initialize; and the cloud-provider instance gone
	// when the NodeClaim is deleted.
	{"regression", "NodeClaim StandaloneNodeClaim should create a standard NodeClaim"},
	{"regression", "NodeClaim StandaloneNodeClaim should remove the cloudProvider NodeClaim when the cluster NodeClaim is deleted"},
	{"regression", "NodeClaim StandaloneNodeClaim should delete a NodeClaim if it references a NodeClass that doesn't exist"},
	// Validation: the bundle's CRDs refuse what core's webhooks-free validation must refuse.
	{"regression", "Integration Validation NodePool should error when a restricted label is used in labels (karpenter.sh/nodepool)"},
	{"regression", "Integration Validation NodePool should error when minValues for a requirement key is greater than the values specified within In operator"},
	// Provisioning with DaemonSet overhead.
	{"regression", "Integration DaemonSet should account for LimitRange Default on daemonSet pods for resources"},
	// Termination: the node and its NodeGroup go on deletion; emptiness consolidation.
	{"disruption", "Termination should terminate the node and the instance on deletion"},
	{"disruption", "Termination Emptiness should terminate an empty node"},
	// Drift (the NodePool changes, the node is replaced within budgets).
	{"disruption", "Drift Budgets should respect budgets for empty drift"},
}

// SubsetFocus is the --ginkgo.focus that selects exactly the subset (the texts, anchored).
func SubsetFocus() string {
	parts := make([]string, 0, len(Subset))
	for _, s := range Subset {
		parts = append(parts, regexp.QuoteMeta(s.Text)+"$")
	}
	return strings.Join(parts, "|")
}

// subsetSuites are the suites the subset needs, in Suites order.
func subsetSuites() []string {
	var out []string
	for _, s := range Suites {
		if slices.ContainsFunc(Subset, func(x SubsetSpec) bool { return x.Suite == s }) {
			out = append(out, s)
		}
	}
	return out
}
