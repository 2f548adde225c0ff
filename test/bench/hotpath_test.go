package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	clock "k8s.io/utils/clock"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// The hot paths Karpenter calls on every scheduling loop. `go test -bench . ./test/bench`
// runs them; TestBench runs them through testing.Benchmark and reports them.

func newCatalogue(tb testing.TB) *catalog.Catalog {
	base, err := catalog.LoadBase()
	if err != nil {
		tb.Fatal(err)
	}
	cat, err := catalog.New(base, "par", nil, logr.Discard())
	if err != nil {
		tb.Fatal(err)
	}
	return cat
}

// BenchmarkGetInstanceTypes: quota unknown (no limit learned or configured), the common path.
func BenchmarkGetInstanceTypes(b *testing.B) {
	cp := cloudprovider.New(nil, nil, newCatalogue(b), nil, quota.NewTracker(clock.RealClock{}, quota.Limit{}), nil, clock.RealClock{}, 0)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cp.GetInstanceTypes(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetInstanceTypesQuotaLimited: quota configured (40/40) with 16 vCPU / 24 GB used,
// so the flavors that do not fit are rebuilt as unavailable offerings on every call.
func BenchmarkGetInstanceTypesQuotaLimited(b *testing.B) {
	tr := quota.NewTracker(clock.RealClock{}, quota.Limit{CPU: 40, GB: 40})
	tr.Observe(quota.Usage{CPU: 16, GB: 24}, map[string]bool{})
	cp := cloudprovider.New(nil, nil, newCatalogue(b), nil, tr, nil, clock.RealClock{}, 0)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cp.GetInstanceTypes(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCatalogueSetLive: a price refresh, which rebuilds every instance type and its
// offerings.
func BenchmarkCatalogueSetLive(b *testing.B) {
	cat := newCatalogue(b)
	rates := []catalog.Rates{
		{Currency: "EUR", VCPUHourly: 0.00277777777, RAMGBHourly: 0.00555555555},
		{Currency: "EUR", VCPUHourly: 0.003, RAMGBHourly: 0.006},
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := cat.SetLive(rates[i%2], nil); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkLoadBundle: decoding the rendered bundle (out/), what the harness and an
// installation read.
func BenchmarkLoadBundle(b *testing.B) {
	dir := filepath.Join(stack.ModuleRoot(), "out")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := stack.LoadBundle(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// HotPaths are the benchmarks above, for the report.
var HotPaths = []struct {
	Name string
	F    func(*testing.B)
}{
	{"GetInstanceTypes", BenchmarkGetInstanceTypes},
	{"GetInstanceTypesQuotaLimited", BenchmarkGetInstanceTypesQuotaLimited},
	{"CatalogueSetLive", BenchmarkCatalogueSetLive},
	{"LoadBundle", BenchmarkLoadBundle},
}
