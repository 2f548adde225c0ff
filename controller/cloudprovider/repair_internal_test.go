package cloudprovider

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A build that links nothing (the product's) replaces nodes after 10 minutes, on both policies.
func TestRepairTolerationIsTenMinutesUnlessLinked(t *testing.T) {
	g := NewWithT(t)
	g.Expect(repairTolerationOverride).To(BeEmpty(), "this test binary must be built without the e2e repair ldflag")
	for _, p := range (&CloudProvider{}).RepairPolicies() {
		g.Expect(p.TolerationDuration).To(Equal(10*time.Minute), "%s=%s", p.ConditionType, p.ConditionStatus)
	}
}

func TestLinkedRepairToleration(t *testing.T) {
	g := NewWithT(t)
	d, err := parseRepairToleration("30s")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).To(Equal(30 * time.Second))
	for _, bad := range []string{"30", "soon", "0s", "-1m"} {
		_, err := parseRepairToleration(bad)
		g.Expect(err).To(HaveOccurred(), bad)
		g.Expect(func() { mustRepairToleration(bad) }).To(Panic(), bad)
	}
}
