package cloudprovider

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestUnavailableForgetsEachKindOfRefusalOnItsOwnTerms(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	u := newUnavailable(clk)
	g.Expect(u.snapshot()).To(BeNil())

	u.markUnsupported("2XL")
	g.Expect(u.markRefused("2XS")).To(Equal(refusedTTL))
	g.Expect(u.snapshot()).To(Equal(map[string]bool{"2XL": true, "2XS": true}))

	// A first unclassified refusal fades after its memory.
	clk.Step(refusedTTL)
	g.Expect(u.snapshot()).To(Equal(map[string]bool{"2XL": true}))

	// The apiserver's refusal lasts the hour, and a refusal renews it.
	clk.Step(flavorUnsupportedTTL - refusedTTL - time.Second)
	g.Expect(u.snapshot()).To(HaveKey("2XL"))
	u.markUnsupported("2XL")
	clk.Step(time.Second)
	g.Expect(u.snapshot()).To(HaveKey("2XL"), "renewed")
	clk.Step(flavorUnsupportedTTL - time.Second)
	g.Expect(u.snapshot()).To(BeNil())
}

func TestUnavailableBacksOffOnRepeatedUnclassifiedRefusals(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	u := newUnavailable(clk)

	// Refused, offered again once the memory ends, refused again: 3, 6, 12, 24, 48, 60, 60 min.
	want := []time.Duration{3 * time.Minute, 6 * time.Minute, 12 * time.Minute, 24 * time.Minute, 48 * time.Minute, time.Hour, time.Hour}
	for i, d := range want {
		g.Expect(u.markRefused("S")).To(Equal(d), "refusal %d", i+1)
		clk.Step(d - time.Second)
		g.Expect(u.snapshot()).To(HaveKey("S"), "refusal %d: still set aside", i+1)
		clk.Step(time.Second)
		g.Expect(u.snapshot()).To(BeNil(), "refusal %d: offered again", i+1)
		clk.Step(time.Minute) // the next launch of it is refused a minute later
	}

	// Another flavor's streak is its own.
	g.Expect(u.markRefused("M")).To(Equal(refusedTTL))

	// Accepted once, the flavor starts over.
	clk.Step(refusedTTL)
	u.launched("M")
	g.Expect(u.markRefused("M")).To(Equal(refusedTTL))

	// Offered for an hour without a refusal, the flavor starts over.
	clk.Step(maxRefusedTTL + time.Second)
	g.Expect(u.snapshot()).To(BeNil())
	g.Expect(u.markRefused("S")).To(Equal(refusedTTL))
}
