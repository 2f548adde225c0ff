package quota_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// The durations the tracker's guarantees rest on, by name.
var durations = map[string]time.Duration{
	"LeakLifetime": quota.LeakLifetime, "ProofLifetime": quota.ProofLifetime,
	"RefusalMemory": quota.RefusalMemory, "DefaultDoubt": quota.DefaultDoubt,
	"UptakeBound": quota.UptakeBound, "VerdictSlack": quota.VerdictSlack,
	"MaxLeakLifetime": quota.MaxLeakLifetime, "MinLeakLifetime": quota.MinLeakLifetime,
}

// docs/quota.md states the tracker's durations in bold: it must state every one the code has,
// and no other (a duration the code no longer has is a stale promise).
func TestTheQuotaPageStatesTheCodesDurations(t *testing.T) {
	page, err := os.ReadFile("../../docs/quota.md")
	if err != nil {
		t.Fatal(err)
	}
	var known []string
	for name, d := range durations {
		known = append(known, d.String())
		if !strings.Contains(string(page), "**"+d.String()+"**") {
			t.Errorf("docs/quota.md does not state %s (%s) in bold", name, d)
		}
	}
	for _, m := range regexp.MustCompile(`\*\*([0-9][0-9hms.]*)\*\*`).FindAllStringSubmatch(string(page), -1) {
		if !slices.Contains(known, m[1]) {
			t.Errorf("docs/quota.md states **%s**, which is none of the tracker's durations", m[1])
		}
	}
}
