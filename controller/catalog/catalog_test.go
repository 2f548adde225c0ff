package catalog

import (
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
)

// platformFlavor is one row of the platform's published flavor table, written out by hand so that the tests pin the published numbers, not the embedded file.
type platformFlavor struct {
	name      string
	cpu       int64
	memoryKi  int64
	nominalGB int64
	price     float64
	source    string
}

var platformTable = []platformFlavor{
	{"2XS", 4, 3715344, 4, 0.0333, "measured"},
	{"XS", 6, 7553664, 8, 0.0611, "measured"},
	{"S", 8, 11385832, 12, 0.0889, "measured"},
	{"M", 10, 15229256, 16, 0.1167, "measured"},
	{"L", 12, 22896304, 24, 0.1667, "measured"},
	{"XL", 16, 30584176, 32, 0.2222, "measured"},
}

const (
	platformVCPURate         = 0.00277777777
	platformRAMRate          = 0.00555555555
	platformEphemeralKi      = 40971488
	platformPods             = 110
	platformKubeReservedKi   = 100 * 1024 // 100Mi
	platformEvictionHardEphe = 4097149
)

func ptrTo[T any](v T) *T { return &v }

func mustBase(t testing.TB) Base {
	t.Helper()
	b, err := LoadBase()
	if err != nil {
		t.Fatalf("LoadBase: %v", err)
	}
	return b
}

func mustNew(t testing.TB, region string, ovs []Override) *Catalog {
	t.Helper()
	c, err := New(mustBase(t), region, ovs, logr.Discard())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func mustGet(t testing.TB, c *Catalog, name string) *cloudprovider.InstanceType {
	t.Helper()
	it, ok := c.Get(name)
	if !ok {
		t.Fatalf("catalogue has no flavor %q", name)
	}
	return it
}

func names(its []*cloudprovider.InstanceType) []string {
	out := make([]string, 0, len(its))
	for _, it := range its {
		out = append(out, it.Name)
	}
	return out
}

func ki(n int64) resource.Quantity { return *resource.NewQuantity(n*1024, resource.BinarySI) }

// single returns the single value of an In requirement, failing when there is not exactly one.
func single(g Gomega, it *cloudprovider.InstanceType, key string) string {
	g.ExpectWithOffset(1, it.Requirements.Has(key)).To(BeTrue(), "requirement %s missing on %s", key, it.Name)
	r := it.Requirements.Get(key)
	g.ExpectWithOffset(1, r.Operator()).To(Equal(corev1.NodeSelectorOpIn), "requirement %s on %s", key, it.Name)
	g.ExpectWithOffset(1, r.Values()).To(HaveLen(1), "requirement %s on %s", key, it.Name)
	return r.Values()[0]
}

func TestLoadBaseMatchesThePlatformTable(t *testing.T) {
	g := NewWithT(t)
	b := mustBase(t)

	g.Expect(b.Rates.Currency).To(Equal("EUR"))
	g.Expect(b.Rates.VCPUHourly).To(Equal(platformVCPURate))
	g.Expect(b.Rates.RAMGBHourly).To(Equal(platformRAMRate))
	g.Expect(b.Node).To(Equal(NodeShape{
		EphemeralStorageKi:             platformEphemeralKi,
		Pods:                           platformPods,
		KubeReservedMemoryKi:           platformKubeReservedKi,
		EvictionHardEphemeralStorageKi: platformEvictionHardEphe,
	}))

	g.Expect(b.Flavors).To(HaveLen(len(platformTable)))
	for i, want := range platformTable {
		g.Expect(b.Flavors[i]).To(Equal(Flavor{
			Name: want.name, CPU: want.cpu, MemoryKi: want.memoryKi, NominalGB: want.nominalGB,
			PriceHourly: want.price, Source: want.source,
		}), "flavor %d", i)
	}
	g.Expect(b.Validate()).To(Succeed())
}

func TestBaseJSONIsTheEmbeddedDocument(t *testing.T) {
	g := NewWithT(t)
	g.Expect(BaseJSON()).To(MatchJSON(string(baseJSON)))
	g.Expect(string(BaseJSON())).To(ContainSubstring(`"2XS"`))
}

func TestPriceForReproducesEveryPublishedPrice(t *testing.T) {
	rates := Rates{Currency: "EUR", VCPUHourly: platformVCPURate, RAMGBHourly: platformRAMRate}
	for _, f := range platformTable {
		t.Run(f.name, func(t *testing.T) {
			NewWithT(t).Expect(PriceFor(f.cpu, f.nominalGB, rates)).To(Equal(f.price))
		})
	}
	// The base catalogue's own rates give the base catalogue's own prices.
	b := mustBase(t)
	for _, f := range b.Flavors {
		NewWithT(t).Expect(PriceFor(f.CPU, f.NominalGB, b.Rates)).To(Equal(f.PriceHourly), f.Name)
	}
}

func TestPriceForRoundsToFourDecimals(t *testing.T) {
	for _, tc := range []struct {
		cpu, gb int64
		rates   Rates
		want    float64
	}{
		{1, 0, Rates{VCPUHourly: 0.00277777777, RAMGBHourly: 1}, 0.0028},
		{0, 1, Rates{VCPUHourly: 1, RAMGBHourly: 0.00555555555}, 0.0056},
		{2, 3, Rates{VCPUHourly: 0.01, RAMGBHourly: 0.002}, 0.026},
		{1, 1, Rates{VCPUHourly: 0.00004, RAMGBHourly: 0.00001}, 0.0001},
		{1, 1, Rates{VCPUHourly: 0.00003, RAMGBHourly: 0.00001}, 0},
	} {
		NewWithT(t).Expect(PriceFor(tc.cpu, tc.gb, tc.rates)).To(Equal(tc.want), "%+v", tc)
	}
}

func TestBaseValidateRejectsEachBrokenField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Base)
		want   string
	}{
		{"zero vcpu rate", func(b *Base) { b.Rates.VCPUHourly = 0 }, "rates"},
		{"negative ram rate", func(b *Base) { b.Rates.RAMGBHourly = -1 }, "rates"},
		{"zero ephemeral storage", func(b *Base) { b.Node.EphemeralStorageKi = 0 }, "node"},
		{"zero pods", func(b *Base) { b.Node.Pods = 0 }, "node"},
		{"negative kube-reserved", func(b *Base) { b.Node.KubeReservedMemoryKi = -1 }, "node"},
		{"negative eviction", func(b *Base) { b.Node.EvictionHardEphemeralStorageKi = -1 }, "node"},
		{"no flavors", func(b *Base) { b.Flavors = nil }, "flavors: empty"},
		{"duplicate flavor", func(b *Base) { b.Flavors[1].Name = b.Flavors[0].Name }, `flavors[1].name: duplicate "2XS"`},
		{"lowercase name", func(b *Base) { b.Flavors[2].Name = "s" }, `flavors[2]: name: "s"`},
		{"zero cpu", func(b *Base) { b.Flavors[3].CPU = 0 }, "flavors[3]: M.cpu"},
		{"zero memory", func(b *Base) { b.Flavors[3].MemoryKi = 0 }, "flavors[3]: M.memoryKi"},
		{"zero nominal", func(b *Base) { b.Flavors[3].NominalGB = 0 }, "flavors[3]: M.nominalGB"},
		{"zero price", func(b *Base) { b.Flavors[4].PriceHourly = 0 }, "flavors[4]: L.priceHourly"},
		{"infinite price", func(b *Base) { b.Flavors[4].PriceHourly = posInf() }, "flavors[4]: L.priceHourly"},
		{"NaN price", func(b *Base) { b.Flavors[4].PriceHourly = nan() }, "flavors[4]: L.priceHourly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := mustBase(t)
			b.Flavors = slices.Clone(b.Flavors)
			tc.mutate(&b)
			err := b.Validate()
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
}

func TestInstanceTypeRequirementsAndLabels(t *testing.T) {
	const region = "test-region" // not the default: the zone must come from the argument
	c := mustNew(t, region, nil)
	g := NewWithT(t)
	g.Expect(c.region).To(Equal(region))
	for _, f := range platformTable {
		it := mustGet(t, c, f.name)
		g.Expect(it.Name).To(Equal(f.name))
		g.Expect(sortedKeys(it)).To(Equal(sortedStrings(
			corev1.LabelInstanceTypeStable,
			corev1.LabelArchStable,
			corev1.LabelOSStable,
			corev1.LabelTopologyRegion,
			corev1.LabelTopologyZone,
			karpv1.CapacityTypeLabelKey,
			ngv1.LabelFlavor,
			ngv1.LabelClusterNodeRole,
			v1alpha1.LabelInstanceCPU,
			v1alpha1.LabelInstanceMemory,
		)), f.name)
		g.Expect(single(g, it, corev1.LabelInstanceTypeStable)).To(Equal(f.name))
		g.Expect(single(g, it, corev1.LabelArchStable)).To(Equal("amd64"))
		g.Expect(single(g, it, corev1.LabelOSStable)).To(Equal("linux"))
		g.Expect(single(g, it, corev1.LabelTopologyZone)).To(Equal(region))
		g.Expect(single(g, it, corev1.LabelTopologyRegion)).To(Equal(region))
		g.Expect(single(g, it, karpv1.CapacityTypeLabelKey)).To(Equal(karpv1.CapacityTypeOnDemand))
		g.Expect(single(g, it, "clever-cloud.com/flavor")).To(Equal(f.name))
		g.Expect(single(g, it, "clever-cloud.com/cluster-node-role")).To(Equal("worker"))
		g.Expect(single(g, it, "karpenter.clever-cloud.com/instance-cpu")).To(Equal(strconv.FormatInt(f.cpu, 10)))
		g.Expect(single(g, it, "karpenter.clever-cloud.com/instance-memory")).To(Equal(strconv.FormatInt(f.nominalGB*1024, 10)))
	}
	// Spot-check the memory label against the hand-computed value for S (12 GB).
	g.Expect(single(g, mustGet(t, c, "S"), v1alpha1.LabelInstanceMemory)).To(Equal("12288"))
}

func sortedKeys(it *cloudprovider.InstanceType) []string {
	return slices.Sorted(slices.Values(it.Requirements.Keys().UnsortedList()))
}

func sortedStrings(s ...string) []string { slices.Sort(s); return s }

func TestInstanceTypeCapacityOverheadAndAllocatable(t *testing.T) {
	c := mustNew(t, "par", nil)
	for _, f := range platformTable {
		t.Run(f.name, func(t *testing.T) {
			g := NewWithT(t)
			it := mustGet(t, c, f.name)

			g.Expect(it.Capacity).To(HaveLen(4))
			g.Expect(it.Capacity.Cpu().Equal(*resource.NewQuantity(f.cpu, resource.DecimalSI))).To(BeTrue(), "cpu %s", it.Capacity.Cpu())
			g.Expect(it.Capacity.Memory().Equal(ki(f.memoryKi))).To(BeTrue(), "memory %s", it.Capacity.Memory())
			g.Expect(it.Capacity.StorageEphemeral().Equal(ki(platformEphemeralKi))).To(BeTrue())
			g.Expect(it.Capacity.Pods().Value()).To(Equal(int64(platformPods)))

			g.Expect(it.Overhead).NotTo(BeNil())
			g.Expect(it.Overhead.KubeReserved).To(HaveLen(1))
			g.Expect(it.Overhead.KubeReserved.Memory().Equal(resource.MustParse("100Mi"))).To(BeTrue(), "kube-reserved %s", it.Overhead.KubeReserved.Memory())
			g.Expect(it.Overhead.KubeReserved.Cpu().IsZero()).To(BeTrue(), "no CPU reservation")
			g.Expect(it.Overhead.SystemReserved).To(BeEmpty())
			g.Expect(it.Overhead.EvictionThreshold).To(HaveLen(1))
			g.Expect(it.Overhead.EvictionThreshold.StorageEphemeral().Equal(resource.MustParse("4097149Ki"))).To(BeTrue())

			alloc := it.Allocatable()
			g.Expect(alloc.Cpu().Value()).To(Equal(f.cpu))
			g.Expect(alloc.Memory().Equal(ki(f.memoryKi-102400))).To(BeTrue(), "allocatable memory %s", alloc.Memory())
			g.Expect(alloc.StorageEphemeral().Equal(ki(40971488-4097149))).To(BeTrue(), "allocatable ephemeral %s", alloc.StorageEphemeral())
			g.Expect(alloc.Pods().Value()).To(Equal(int64(110)))
		})
	}
}

func TestInstanceTypeHasOneOnDemandOfferingWithThePrice(t *testing.T) {
	c := mustNew(t, "par", nil)
	for _, f := range platformTable {
		g := NewWithT(t)
		it := mustGet(t, c, f.name)
		g.Expect(it.Offerings).To(HaveLen(1), f.name)
		o := it.Offerings[0]
		g.Expect(o.Price).To(Equal(f.price), f.name)
		g.Expect(o.Available).To(BeTrue(), f.name)
		g.Expect(o.CapacityType()).To(Equal(karpv1.CapacityTypeOnDemand))
		g.Expect(o.Zone()).To(Equal("par"))
		p, ok := it.OfferingPrice("par", karpv1.CapacityTypeOnDemand)
		g.Expect(ok).To(BeTrue())
		g.Expect(p).To(Equal(f.price))
		_, ok = it.OfferingPrice("par", karpv1.CapacityTypeSpot)
		g.Expect(ok).To(BeFalse(), "no spot offering")
	}
}

func TestInstanceTypesAreSortedByPrice(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", nil)
	its := c.InstanceTypes()
	g.Expect(names(its)).To(Equal([]string{"2XS", "XS", "S", "M", "L", "XL"}))
	g.Expect(slices.IsSortedFunc(its, func(a, b *cloudprovider.InstanceType) int {
		return cmpFloat(a.Offerings[0].Price, b.Offerings[0].Price)
	})).To(BeTrue())
	flavors := c.Flavors()
	g.Expect(flavors).To(HaveLen(6))
	for i, f := range flavors {
		g.Expect(f.Name).To(Equal(its[i].Name))
	}

	// An override that makes XL the cheapest moves it first.
	c = mustNew(t, "par", []Override{{Name: "XL", PriceHourly: ptrTo(0.001)}})
	g.Expect(names(c.InstanceTypes())).To(Equal([]string{"XL", "2XS", "XS", "S", "M", "L"}))
}

func TestInstanceTypesBreakPriceTiesByCPU(t *testing.T) {
	g := NewWithT(t)
	// 2XS priced like M but with more vCPUs than M: M must come first despite the base order.
	c := mustNew(t, "par", []Override{{Name: "2XS", PriceHourly: ptrTo(0.1167), CPU: ptrTo(int64(12))}})
	g.Expect(names(c.InstanceTypes())).To(Equal([]string{"XS", "S", "M", "2XS", "L", "XL"}))
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestFlavorsReturnsACopy(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", nil)
	fs := c.Flavors()
	fs[0].PriceHourly = 99
	fs[0].Name = "MUTATED"
	g.Expect(c.Flavors()[0].Name).To(Equal("2XS"))
	g.Expect(c.Flavors()[0].PriceHourly).To(Equal(0.0333))
}

func TestGetUnknownFlavor(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", nil)
	it, ok := c.Get("XXL")
	g.Expect(ok).To(BeFalse())
	g.Expect(it).To(BeNil())
	_, ok = c.Get("m") // names are case-sensitive, as the NodeGroup API spells them
	g.Expect(ok).To(BeFalse())
}

func TestOverridesApplyFieldByField(t *testing.T) {
	base := platformTable[3] // M
	for _, tc := range []struct {
		name     string
		override Override
		want     Flavor
	}{
		{"name only changes nothing", Override{Name: "M"},
			Flavor{Name: "M", CPU: base.cpu, MemoryKi: base.memoryKi, NominalGB: base.nominalGB, PriceHourly: base.price, Source: "measured"}},
		{"price only", Override{Name: "M", PriceHourly: ptrTo(0.5)},
			Flavor{Name: "M", CPU: base.cpu, MemoryKi: base.memoryKi, NominalGB: base.nominalGB, PriceHourly: 0.5, Source: "measured"}},
		{"cpu only", Override{Name: "M", CPU: ptrTo(int64(11))},
			Flavor{Name: "M", CPU: 11, MemoryKi: base.memoryKi, NominalGB: base.nominalGB, PriceHourly: base.price, Source: "measured"}},
		{"memoryKi only", Override{Name: "M", MemoryKi: ptrTo(int64(16000000))},
			Flavor{Name: "M", CPU: base.cpu, MemoryKi: 16000000, NominalGB: base.nominalGB, PriceHourly: base.price, Source: "measured"}},
		{"nominalGB only", Override{Name: "M", NominalGB: ptrTo(int64(17))},
			Flavor{Name: "M", CPU: base.cpu, MemoryKi: base.memoryKi, NominalGB: 17, PriceHourly: base.price, Source: "measured"}},
		{"every field", Override{Name: "M", CPU: ptrTo(int64(9)), MemoryKi: ptrTo(int64(1000)), NominalGB: ptrTo(int64(1)), PriceHourly: ptrTo(0.01)},
			Flavor{Name: "M", CPU: 9, MemoryKi: 1000, NominalGB: 1, PriceHourly: 0.01, Source: "measured"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := mustNew(t, "par", []Override{tc.override})
			fs := c.Flavors()
			g.Expect(fs).To(HaveLen(6), "an override of a known flavor adds nothing")
			i := slices.IndexFunc(fs, func(f Flavor) bool { return f.Name == "M" })
			g.Expect(fs[i]).To(Equal(tc.want))

			it := mustGet(t, c, "M")
			g.Expect(it.Offerings[0].Price).To(Equal(tc.want.PriceHourly))
			g.Expect(it.Capacity.Cpu().Value()).To(Equal(tc.want.CPU))
			g.Expect(it.Capacity.Memory().Equal(ki(tc.want.MemoryKi))).To(BeTrue())
			g.Expect(single(g, it, v1alpha1.LabelInstanceCPU)).To(Equal(strconv.FormatInt(tc.want.CPU, 10)))
			g.Expect(single(g, it, v1alpha1.LabelInstanceMemory)).To(Equal(strconv.FormatInt(tc.want.NominalGB*1024, 10)))

			// Other flavors are untouched.
			s := mustGet(t, c, "S")
			g.Expect(s.Offerings[0].Price).To(Equal(0.0889))
			g.Expect(s.Capacity.Cpu().Value()).To(Equal(int64(8)))
		})
	}
}

func TestOverrideAddsANewFlavor(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", []Override{{Name: "CUSTOM", CPU: ptrTo(int64(2)), MemoryKi: ptrTo(int64(2097152)), PriceHourly: ptrTo(0.01)}})
	fs := c.Flavors()
	g.Expect(fs).To(HaveLen(7))
	g.Expect(fs[0]).To(Equal(Flavor{Name: "CUSTOM", CPU: 2, MemoryKi: 2097152, NominalGB: 2, PriceHourly: 0.01, Source: "override"}))
	it := mustGet(t, c, "CUSTOM")
	g.Expect(it.Offerings).To(HaveLen(1))
	g.Expect(it.Offerings[0].Available).To(BeTrue())
	g.Expect(it.Offerings[0].Price).To(Equal(0.01))
	g.Expect(single(g, it, v1alpha1.LabelInstanceMemory)).To(Equal("2048"))
	g.Expect(single(g, it, ngv1.LabelFlavor)).To(Equal("CUSTOM"))
	g.Expect(names(c.InstanceTypes())[0]).To(Equal("CUSTOM"), "cheapest first")
}

func TestOverrideNewFlavorNominalGB(t *testing.T) {
	for _, tc := range []struct {
		memoryKi int64
		nominal  *int64
		want     int64
	}{
		{2097152, nil, 2},             // exactly 2 GiB
		{2097153, nil, 3},             // one KiB over rounds up
		{1, nil, 1},                   // anything positive is at least 1
		{3911884, nil, 4},             // 2XS-like
		{2097152, ptrTo(int64(5)), 5}, // an explicit nominalGB wins
	} {
		g := NewWithT(t)
		c := mustNew(t, "par", []Override{{Name: "NEW", CPU: ptrTo(int64(1)), MemoryKi: ptrTo(tc.memoryKi), NominalGB: tc.nominal, PriceHourly: ptrTo(0.02)}})
		i := slices.IndexFunc(c.Flavors(), func(f Flavor) bool { return f.Name == "NEW" })
		g.Expect(i).To(BeNumerically(">=", 0))
		g.Expect(c.Flavors()[i].NominalGB).To(Equal(tc.want), "memoryKi %d", tc.memoryKi)
	}
}

func TestNewRejectsAnIncompleteNewFlavor(t *testing.T) {
	cpu, mem, price := ptrTo(int64(2)), ptrTo(int64(2097152)), ptrTo(0.01)
	for _, tc := range []struct {
		name string
		o    Override
	}{
		{"no cpu", Override{Name: "CUSTOM", MemoryKi: mem, PriceHourly: price}},
		{"no memoryKi", Override{Name: "CUSTOM", CPU: cpu, PriceHourly: price}},
		{"no priceHourly", Override{Name: "CUSTOM", CPU: cpu, MemoryKi: mem}},
		{"name only", Override{Name: "CUSTOM"}},
		{"no priceHourly even with nominalGB", Override{Name: "CUSTOM", CPU: cpu, MemoryKi: mem, NominalGB: ptrTo(int64(2))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c, err := New(mustBase(t), "par", []Override{tc.o}, logr.Discard())
			g.Expect(err).To(HaveOccurred())
			g.Expect(c).To(BeNil())
			g.Expect(err.Error()).To(ContainSubstring("CUSTOM"))
			g.Expect(err.Error()).To(ContainSubstring("cpu, memoryKi and priceHourly"))
		})
	}
}

func TestSynthesizeHasNoAvailableOffering(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", nil)

	it := c.Synthesize("GONE")
	g.Expect(it.Name).To(Equal("GONE"))
	g.Expect(it.Offerings).To(HaveLen(1))
	g.Expect(it.Offerings[0].Available).To(BeFalse())
	g.Expect(it.Offerings.Available()).To(BeEmpty())
	g.Expect(single(g, it, corev1.LabelInstanceTypeStable)).To(Equal("GONE"))
	g.Expect(single(g, it, corev1.LabelTopologyZone)).To(Equal("par"))
	g.Expect(it.Capacity.Cpu().IsZero()).To(BeTrue(), "nothing learned: empty sizing")
	g.Expect(it.Capacity.Memory().IsZero()).To(BeTrue())
	_, ok := c.Get("GONE")
	g.Expect(ok).To(BeFalse(), "synthesizing does not add to the catalogue")
	g.Expect(c.InstanceTypes()).To(HaveLen(6))

	// Once a node of the flavor reported its capacity, the synthesized type is sized from it.
	g.Expect(c.Learn("GONE", Learned{CPU: 3, MemoryKi: 3000000})).To(BeTrue())
	it = c.Synthesize("GONE")
	g.Expect(it.Capacity.Cpu().Value()).To(Equal(int64(3)))
	g.Expect(it.Capacity.Memory().Equal(ki(3000000))).To(BeTrue())
	g.Expect(it.Offerings[0].Available).To(BeFalse())

	// Even a flavor the catalogue has is synthesized unavailable.
	g.Expect(c.Synthesize("M").Offerings[0].Available).To(BeFalse())
}

func posInf() float64 { return math.Inf(1) }
func nan() float64    { return math.NaN() }
