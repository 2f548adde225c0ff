package quota_test

import (
	"os"
	"strings"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// docs/quota.md states the tracker's durations: it must state the ones the code has.
func TestTheQuotaPageStatesTheCodesDurations(t *testing.T) {
	page, err := os.ReadFile("../../docs/quota.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]interface{ String() string }{
		"LeakLifetime": quota.LeakLifetime, "ProofLifetime": quota.ProofLifetime,
		"RefusalMemory": quota.RefusalMemory, "MaxRefusalMemory": quota.MaxRefusalMemory,
	} {
		if !strings.Contains(string(page), "**"+d.String()+"**") {
			t.Errorf("docs/quota.md does not state %s (%s) in bold", name, d)
		}
	}
}
