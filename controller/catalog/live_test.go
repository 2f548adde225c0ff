package catalog

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
)

var testRates = Rates{Currency: "EUR", VCPUHourly: 0.01, RAMGBHourly: 0.002}

// availability maps every instance type to whether its single offering is available.
func availability(c *Catalog) map[string]bool {
	out := map[string]bool{}
	for _, it := range c.InstanceTypes() {
		if len(it.Offerings) != 1 {
			panic(fmt.Sprintf("%s has %d offerings", it.Name, len(it.Offerings)))
		}
		out[it.Name] = it.Offerings[0].Available
	}
	return out
}

func prices(c *Catalog) map[string]float64 {
	out := map[string]float64{}
	for _, it := range c.InstanceTypes() {
		out[it.Name] = it.Offerings[0].Price
	}
	return out
}

func TestSetLiveRepricesEveryBaseFlavor(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", nil)
	g.Expect(c.SetLive(testRates, nil)).To(Succeed())
	// By hand: 4×0.01+4×0.002=0.048, 6×0.01+8×0.002=0.076, …
	g.Expect(prices(c)).To(Equal(map[string]float64{
		"2XS": 0.048, "XS": 0.076, "S": 0.104, "M": 0.132, "L": 0.168, "XL": 0.224,
	}))
	for _, f := range platformTable {
		g.Expect(mustGet(t, c, f.name).Offerings[0].Price).To(Equal(PriceFor(f.cpu, f.nominalGB, testRates)))
	}
	g.Expect(availability(c)).To(HaveEach(BeTrue()), "no list: every flavor is offered")
	// Sizing does not move with prices.
	g.Expect(mustGet(t, c, "M").Capacity.Cpu().Value()).To(Equal(int64(10)))

	// The reference rates give the published prices back.
	g.Expect(c.SetLive(mustBase(t).Rates, nil)).To(Succeed())
	for _, f := range platformTable {
		g.Expect(mustGet(t, c, f.name).Offerings[0].Price).To(Equal(f.price), f.name)
	}
}

func TestSetLiveKeepsOverridesWinning(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", []Override{
		{Name: "M", PriceHourly: ptrTo(0.5)},
		{Name: "S", CPU: ptrTo(int64(7))},
		{Name: "CUSTOM", CPU: ptrTo(int64(2)), MemoryKi: ptrTo(int64(2097152)), PriceHourly: ptrTo(0.01)},
	})
	for range 3 { // repeated refreshes keep re-applying them
		g.Expect(c.SetLive(testRates, nil)).To(Succeed())
		g.Expect(mustGet(t, c, "M").Offerings[0].Price).To(Equal(0.5))
		g.Expect(mustGet(t, c, "CUSTOM").Offerings[0].Price).To(Equal(0.01))
		g.Expect(mustGet(t, c, "S").Capacity.Cpu().Value()).To(Equal(int64(7)))
		g.Expect(mustGet(t, c, "XL").Offerings[0].Price).To(Equal(0.224))
		g.Expect(mustGet(t, c, "2XS").Offerings[0].Price).To(Equal(0.048))
	}
}

func TestSetLiveAvailableList(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", []Override{
		{Name: "XL", PriceHourly: ptrTo(0.3)}, // pinned: stays offered
		{Name: "CUSTOM", CPU: ptrTo(int64(2)), MemoryKi: ptrTo(int64(2097152)), PriceHourly: ptrTo(0.01)},
	})
	list := []string{"2XS", "M", "XXL"} // XXL: offered by the API, unknown to the catalogue
	g.Expect(c.SetLive(testRates, list)).To(Succeed())
	list[0] = "L" // the catalogue keeps its own copy
	g.Expect(availability(c)).To(Equal(map[string]bool{
		"2XS": true, "XS": false, "S": false, "M": true, "L": false, "XL": true, "CUSTOM": true,
	}))
	_, ok := c.Get("XXL")
	g.Expect(ok).To(BeFalse(), "a flavor the catalogue cannot size is skipped")
	// Unavailable flavors are still listed (and still priced): Karpenter must know them to
	// account for running nodes.
	g.Expect(c.InstanceTypes()).To(HaveLen(7))
	g.Expect(mustGet(t, c, "XS").Offerings[0].Price).To(Equal(0.076))

	// An empty list offers only pinned flavors.
	g.Expect(c.SetLive(testRates, []string{})).To(Succeed())
	g.Expect(availability(c)).To(Equal(map[string]bool{
		"2XS": false, "XS": false, "S": false, "M": false, "L": false, "XL": true, "CUSTOM": true,
	}))

	// No list again: everything is offered.
	g.Expect(c.SetLive(testRates, nil)).To(Succeed())
	g.Expect(availability(c)).To(HaveEach(BeTrue()))
	g.Expect(availability(c)).To(HaveLen(7))
}

func TestSetLiveRejectsNonPositiveRatesAndKeepsThePreviousState(t *testing.T) {
	for _, bad := range []Rates{
		{VCPUHourly: 0, RAMGBHourly: 0.002},
		{VCPUHourly: 0.01, RAMGBHourly: 0},
		{VCPUHourly: -0.01, RAMGBHourly: 0.002},
		{VCPUHourly: 0.01, RAMGBHourly: -0.002},
		{VCPUHourly: math.NaN(), RAMGBHourly: 0.002},
		{VCPUHourly: 0.01, RAMGBHourly: math.Inf(1)},
		{},
	} {
		t.Run(fmt.Sprintf("%+v", bad), func(t *testing.T) {
			g := NewWithT(t)
			c := mustNew(t, "par", nil)
			g.Expect(c.SetLive(testRates, []string{"S", "M"})).To(Succeed())
			wantPrices, wantAvail := prices(c), availability(c)
			wantTypes := c.InstanceTypes()

			err := c.SetLive(bad, nil)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("must be positive"))
			g.Expect(prices(c)).To(Equal(wantPrices))
			g.Expect(availability(c)).To(Equal(wantAvail), "the rejected call's list must not be installed either")
			g.Expect(c.InstanceTypes()[0]).To(BeIdenticalTo(wantTypes[0]), "nothing rebuilt")

			// And a later good call still works from there.
			g.Expect(c.SetLive(testRates, nil)).To(Succeed())
			g.Expect(availability(c)).To(HaveEach(BeTrue()))
		})
	}
}

func TestLearnKeepsTheSmallestObservation(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", nil)
	m := func() (int64, int64) {
		it := mustGet(t, c, "M")
		return it.Capacity.Cpu().Value(), it.Capacity.Memory().Value() / 1024
	}

	g.Expect(c.Learn("M", Learned{CPU: 10, MemoryKi: 15900000})).To(BeTrue())
	cpu, mem := m()
	g.Expect([]int64{cpu, mem}).To(Equal([]int64{10, 15900000}))
	i := slices.IndexFunc(c.Flavors(), func(f Flavor) bool { return f.Name == "M" })
	g.Expect(c.Flavors()[i].MemoryKi).To(Equal(int64(15900000)))
	g.Expect(c.Flavors()[i].PriceHourly).To(Equal(0.1167), "learning never touches the price")
	g.Expect(c.Flavors()[i].NominalGB).To(Equal(int64(16)))
	alloc := mustGet(t, c, "M").Allocatable()
	g.Expect(alloc.Memory().Value() / 1024).To(Equal(int64(15900000 - 102400)))

	for _, tc := range []struct {
		name    string
		l       Learned
		changed bool
		cpu     int64
		memKi   int64
	}{
		{"same again", Learned{10, 15900000}, false, 10, 15900000},
		{"bigger", Learned{12, 16000000}, false, 10, 15900000},
		{"bigger memory only", Learned{10, 16000000}, false, 10, 15900000},
		{"smaller memory", Learned{10, 15800000}, true, 10, 15800000},
		{"smaller cpu, bigger memory: both minima kept", Learned{9, 17000000}, true, 9, 15800000},
		{"zero cpu ignored", Learned{0, 1}, false, 9, 15800000},
		{"zero memory ignored", Learned{1, 0}, false, 9, 15800000},
		{"negative ignored", Learned{-1, -1}, false, 9, 15800000},
	} {
		g.Expect(c.Learn("M", tc.l)).To(Equal(tc.changed), tc.name)
		cpu, mem := m()
		g.Expect([]int64{cpu, mem}).To(Equal([]int64{tc.cpu, tc.memKi}), tc.name)
	}
	// Other flavors are untouched.
	g.Expect(mustGet(t, c, "S").Capacity.Memory().Value() / 1024).To(Equal(int64(11385832)))
}

func TestLearnedCapacityWinsOverOverridesAndSurvivesSetLive(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", []Override{{Name: "L", CPU: ptrTo(int64(14)), MemoryKi: ptrTo(int64(25000000))}})
	g.Expect(mustGet(t, c, "L").Capacity.Cpu().Value()).To(Equal(int64(14)))
	g.Expect(c.Learn("L", Learned{CPU: 12, MemoryKi: 23900000})).To(BeTrue())
	g.Expect(c.SetLive(testRates, []string{"L"})).To(Succeed())
	it := mustGet(t, c, "L")
	g.Expect(it.Capacity.Cpu().Value()).To(Equal(int64(12)))
	g.Expect(it.Capacity.Memory().Value() / 1024).To(Equal(int64(23900000)))
	g.Expect(it.Offerings[0].Price).To(Equal(0.168))
}

func TestLearnAnUnknownFlavorDoesNotAddIt(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", nil)
	g.Expect(c.Learn("GONE", Learned{CPU: 2, MemoryKi: 2000000})).To(BeTrue())
	_, ok := c.Get("GONE")
	g.Expect(ok).To(BeFalse())
	g.Expect(c.InstanceTypes()).To(HaveLen(6))
}

func TestInstanceTypesSnapshotIsNotMutatedByLaterChanges(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", nil)
	before := c.InstanceTypes()
	m := before[slices.IndexFunc(before, func(it *cloudprovider.InstanceType) bool { return it.Name == "M" })]
	g.Expect(c.SetLive(testRates, []string{"S"})).To(Succeed())
	g.Expect(c.Learn("M", Learned{CPU: 1, MemoryKi: 1})).To(BeTrue())
	// A caller holding the previous slice keeps a consistent view.
	g.Expect(m.Offerings[0].Price).To(Equal(0.1167))
	g.Expect(m.Offerings[0].Available).To(BeTrue())
	g.Expect(m.Capacity.Cpu().Value()).To(Equal(int64(10)))
	g.Expect(names(before)).To(Equal([]string{"2XS", "XS", "S", "M", "L", "XL"}))
}

// Run with -race: Karpenter reads InstanceTypes from many goroutines while the refresher calls
// SetLive and the capacity controller calls Learn.
func TestConcurrentSetLiveLearnAndReads(t *testing.T) {
	c := mustNew(t, "par", []Override{{Name: "XL", PriceHourly: ptrTo(0.3)}})
	const rounds = 200
	var wg sync.WaitGroup
	errs := make(chan error, 64)

	wg.Go(func() {
		for i := range rounds {
			avail := []string{"2XS", "M"}
			if i%2 == 0 {
				avail = nil
			}
			r := Rates{VCPUHourly: 0.01 + float64(i)*1e-5, RAMGBHourly: 0.002}
			if err := c.SetLive(r, avail); err != nil {
				errs <- err
				return
			}
		}
	})
	for _, flavor := range []string{"M", "S", "GONE"} {
		wg.Go(func() {
			for i := range rounds {
				c.Learn(flavor, Learned{CPU: int64(100 - i%50), MemoryKi: int64(20000000 - i)})
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for range rounds {
				its := c.InstanceTypes()
				if len(its) != 6 {
					errs <- fmt.Errorf("%d instance types", len(its))
					return
				}
				for i, it := range its {
					if i > 0 && its[i-1].Offerings[0].Price > it.Offerings[0].Price {
						errs <- fmt.Errorf("not sorted by price: %s before %s", its[i-1].Name, it.Name)
						return
					}
					_ = it.Allocatable()
					_ = it.Requirements.Keys()
				}
				if it, ok := c.Get("XL"); !ok || !it.Offerings[0].Available || it.Offerings[0].Price != 0.3 {
					errs <- fmt.Errorf("pinned XL lost its override or availability")
					return
				}
				_ = c.Flavors()
				_ = c.Synthesize("GONE")
			}
		})
	}
	wg.Wait()
	close(errs)
	g := NewWithT(t)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	// Every Learn converged on the minima.
	g.Expect(mustGet(t, c, "M").Capacity.Cpu().Value()).To(Equal(int64(51)))
	g.Expect(mustGet(t, c, "M").Capacity.Memory().Value() / 1024).To(Equal(int64(20000000 - rounds + 1)))
	g.Expect(c.Synthesize("GONE").Capacity.Cpu().Value()).To(Equal(int64(51)))
}

func BenchmarkInstanceTypes(b *testing.B) {
	c := mustNew(b, "par", nil)
	b.ReportAllocs()
	for b.Loop() {
		if len(c.InstanceTypes()) != 6 {
			b.Fatal("wrong catalogue")
		}
	}
}

func BenchmarkNewCatalog(b *testing.B) {
	base := mustBase(b)
	ovs := []Override{{Name: "M", PriceHourly: ptrTo(0.2)}, {Name: "CUSTOM", CPU: ptrTo(int64(2)), MemoryKi: ptrTo(int64(2097152)), PriceHourly: ptrTo(0.01)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(base, "par", ovs, logr.Discard()); err != nil {
			b.Fatal(err)
		}
	}
}
