package pricing

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/pricing/pricedoc"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/priceapi"
)

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

func price(r catalog.Rates, cpu, nominalGB int64) float64 {
	return round4(float64(cpu)*r.VCPUHourly + float64(nominalGB)*r.RAMGBHourly)
}

func loadBase(t *testing.T) catalog.Base {
	t.Helper()
	// Read the committed file rather than the catalog package's loader so that this test pins
	// the data, not another package's API.
	b, err := os.ReadFile("../catalog/base.json")
	if err != nil {
		t.Fatalf("reading the base catalogue: %v", err)
	}
	var base catalog.Base
	if err := json.Unmarshal(b, &base); err != nil {
		t.Fatalf("decoding the base catalogue: %v", err)
	}
	return base
}

func TestRealisticPriceSystemPricesExactly(t *testing.T) {
	base := loadBase(t)
	rates, err := DecodePriceSystem(priceapi.PriceSystemDocument(), "par", base.Rates)
	if err != nil {
		t.Fatalf("realistic document rejected: %v", err)
	}
	if rates != base.Rates {
		t.Fatalf("rates %+v, want the base catalogue's %+v", rates, base.Rates)
	}
	// Every flavor of the base catalogue prices exactly as the table says.
	for _, f := range base.Flavors {
		if got := price(rates, f.CPU, f.NominalGB); got != f.PriceHourly {
			t.Errorf("%s: %v EUR/h, want %v", f.Name, got, f.PriceHourly)
		}
	}
	if got := price(rates, 10, 16); got != 0.1167 {
		t.Fatalf("M: %v EUR/h, want 0.1167", got)
	}
}

// The band's lower edge must still price the smallest flavor above zero after rounding, or a
// "valid" document could make a flavor free.
func TestBandFloorKeepsPricesPositive(t *testing.T) {
	base := loadBase(t)
	floor := catalog.Rates{VCPUHourly: base.Rates.VCPUHourly / pricedoc.RateBandFactor, RAMGBHourly: base.Rates.RAMGBHourly / pricedoc.RateBandFactor}
	for _, f := range base.Flavors {
		if p := price(floor, f.CPU, f.NominalGB); p <= 0 {
			t.Errorf("%s prices %v at the band floor", f.Name, p)
		}
	}
}

// mutate decodes the realistic price system, lets fn change it, and re-encodes it.
func mutate(t *testing.T, fn func(doc map[string]any)) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(priceapi.PriceSystemDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	fn(doc)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func countableOf(doc map[string]any, service string) map[string]any {
	for _, c := range doc["countable"].([]any) {
		if m := c.(map[string]any); m["service"] == service {
			return m
		}
	}
	panic("no countable " + service)
}

func TestPriceSystemRejections(t *testing.T) {
	tests := []struct {
		name  string
		body  []byte
		zone  string
		field string // the error must name it
		why   string // and say why
	}{
		{name: "not JSON", body: []byte(`{"zone_id":`), field: "", why: "malformed"},
		{name: "array", body: []byte(`[]`), why: "malformed"},
		{name: "zone missing", body: mutate(t, func(d map[string]any) { delete(d, "zone_id") }), field: "zone_id", why: "missing"},
		{name: "zone mismatch", body: priceapi.PriceSystemDocument(), zone: "rbx", field: "zone_id", why: `"par", asked for "rbx"`},
		{name: "currency missing", body: mutate(t, func(d map[string]any) { delete(d, "currency") }), field: "currency", why: "missing"},
		{name: "currency USD", body: mutate(t, func(d map[string]any) { d["currency"] = "USD" }), field: "currency", why: `"USD"`},
		{name: "countable missing", body: mutate(t, func(d map[string]any) { delete(d, "countable") }), field: "countable", why: "missing"},
		{name: "vcpu missing", body: mutate(t, func(d map[string]any) {
			cs := d["countable"].([]any)
			d["countable"] = slices.DeleteFunc(cs, func(c any) bool { return c.(map[string]any)["service"] == pricedoc.VCPUService })
		}), field: "countable[kubernetes.node.vcpu]", why: "missing"},
		{name: "ram twice", body: mutate(t, func(d map[string]any) {
			d["countable"] = append(d["countable"].([]any), countableOf(d, pricedoc.RAMService))
		}), field: "countable[kubernetes.node.ram]", why: "listed 2 times"},
		{name: "ram unit GB", body: mutate(t, func(d map[string]any) { countableOf(d, pricedoc.RAMService)["data_unit"] = "GB" }),
			field: "countable[kubernetes.node.ram].data_unit", why: `"GB", want "B"`},
		{name: "vcpu unit missing", body: mutate(t, func(d map[string]any) { delete(countableOf(d, pricedoc.VCPUService), "data_unit") }),
			field: "countable[kubernetes.node.vcpu].data_unit", why: "missing"},
		{name: "ram quantity GiB", body: mutate(t, func(d map[string]any) {
			countableOf(d, pricedoc.RAMService)["data_quantity_for_price"] = map[string]any{"quantity": 1073741824}
		}), field: "countable[kubernetes.node.ram].data_quantity_for_price.quantity", why: "1073741824, want 1000000000"},
		{name: "vcpu quantity 1000", body: mutate(t, func(d map[string]any) {
			countableOf(d, pricedoc.VCPUService)["data_quantity_for_price"] = map[string]any{"quantity": 1000}
		}), field: "countable[kubernetes.node.vcpu].data_quantity_for_price.quantity", why: "want 1"},
		{name: "vcpu quantity missing", body: mutate(t, func(d map[string]any) { delete(countableOf(d, pricedoc.VCPUService), "data_quantity_for_price") }),
			field: "countable[kubernetes.node.vcpu].data_quantity_for_price.quantity", why: "missing"},
		{name: "per-second interval", body: mutate(t, func(d map[string]any) {
			countableOf(d, pricedoc.VCPUService)["time_interval_for_price"] = map[string]any{"interval": "PT1S"}
		}), field: "countable[kubernetes.node.vcpu].time_interval_for_price.interval", why: `"PT1S", want "PT1H"`},
		{name: "tiered vcpu", body: mutate(t, func(d map[string]any) {
			countableOf(d, pricedoc.VCPUService)["price_plans"] = []any{
				map[string]any{"max_quantity": 4, "price": 0}, map[string]any{"price": 0.00277777777}}
		}), field: "countable[kubernetes.node.vcpu].price_plans", why: "2 plans: a tiered plan"},
		{name: "no plan", body: mutate(t, func(d map[string]any) { countableOf(d, pricedoc.RAMService)["price_plans"] = []any{} }),
			field: "countable[kubernetes.node.ram].price_plans", why: "empty"},
		{name: "plans missing", body: mutate(t, func(d map[string]any) { delete(countableOf(d, pricedoc.RAMService), "price_plans") }),
			field: "countable[kubernetes.node.ram].price_plans", why: "missing"},
		{name: "price missing", body: mutate(t, func(d map[string]any) { countableOf(d, pricedoc.RAMService)["price_plans"] = []any{map[string]any{}} }),
			field: "countable[kubernetes.node.ram].price_plans[0].price", why: "missing"},
		{name: "null plan", body: mutate(t, func(d map[string]any) { countableOf(d, pricedoc.RAMService)["price_plans"] = []any{nil} }),
			field: "countable[kubernetes.node.ram].price_plans[0].price", why: "missing"},
		{name: "free vcpu", body: mutate(t, func(d map[string]any) {
			countableOf(d, pricedoc.VCPUService)["price_plans"] = []any{map[string]any{"price": 0}}
		}), field: "countable[kubernetes.node.vcpu].price_plans[0].price", why: "must be positive"},
		{name: "negative ram", body: mutate(t, func(d map[string]any) {
			countableOf(d, pricedoc.RAMService)["price_plans"] = []any{map[string]any{"price": -0.005}}
		}), field: "countable[kubernetes.node.ram].price_plans[0].price", why: "must be positive"},
		{name: "ram per GB-month", body: mutate(t, func(d map[string]any) {
			countableOf(d, pricedoc.RAMService)["price_plans"] = []any{map[string]any{"price": 4.0}}
		}), field: "countable[kubernetes.node.ram].price_plans[0].price", why: "outside the sane band"},
		{name: "vcpu per second", body: mutate(t, func(d map[string]any) {
			countableOf(d, pricedoc.VCPUService)["price_plans"] = []any{map[string]any{"price": 0.00277777777 / 3600}}
		}), field: "countable[kubernetes.node.vcpu].price_plans[0].price", why: "outside the sane band"},
		{name: "price as string", body: mutate(t, func(d map[string]any) {
			countableOf(d, pricedoc.VCPUService)["price_plans"] = []any{map[string]any{"price": "0.0027"}}
		}), field: "countable[kubernetes.node.vcpu]", why: "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			zone := tt.zone
			if zone == "" {
				zone = "par"
			}
			rates, err := DecodePriceSystem(tt.body, zone, loadBase(t).Rates)
			if err == nil {
				t.Fatalf("accepted, rates %+v", rates)
			}
			var rej *RejectError
			if !errors.As(err, &rej) {
				t.Fatalf("error %v is not a *RejectError", err)
			}
			if rej.Field != tt.field || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("error %q (field %q), want field %q and %q", err, rej.Field, tt.field, tt.why)
			}
			if rates != (catalog.Rates{}) {
				t.Fatalf("rejected but returned rates %+v", rates)
			}
		})
	}
}

func TestPriceSystemEdgesAccepted(t *testing.T) {
	// Unrelated countables of any shape must not stop node pricing.
	body := mutate(t, func(d map[string]any) {
		d["countable"] = append(d["countable"].([]any), "junk", 42, map[string]any{"service": 7},
			map[string]any{"service": "cellar.storage", "price_plans": "not a list"})
	})
	if _, err := DecodePriceSystem(body, "par", loadBase(t).Rates); err != nil {
		t.Fatalf("unrelated junk rejected the document: %v", err)
	}
	// The band edges are inclusive, and an explicit reference moves the band.
	edge := mutate(t, func(d map[string]any) {
		countableOf(d, pricedoc.VCPUService)["price_plans"] = []any{map[string]any{"price": 0.01}}
	})
	ref := catalog.Rates{Currency: "EUR", VCPUHourly: 0.002, RAMGBHourly: 0.005}
	got, err := DecodePriceSystem(edge, "par", ref)
	if err != nil || got.VCPUHourly != 0.01 {
		t.Fatalf("upper band edge: %+v, %v", got, err)
	}
	// No interval stated is read as hourly, as the platform documents the rates.
	noInterval := mutate(t, func(d map[string]any) { delete(countableOf(d, pricedoc.RAMService), "time_interval_for_price") })
	if _, err := DecodePriceSystem(noInterval, "par", loadBase(t).Rates); err != nil {
		t.Fatalf("countable without interval rejected: %v", err)
	}
}

// The reference is the caller's to give: without it there is no band to judge a rate by, and
// the failure is not blamed on the document.
func TestPriceSystemNeedsAReference(t *testing.T) {
	base := loadBase(t).Rates
	for _, ref := range []catalog.Rates{
		{},
		{Currency: base.Currency, VCPUHourly: base.VCPUHourly},
		{Currency: base.Currency, VCPUHourly: base.VCPUHourly, RAMGBHourly: math.Inf(1)},
		{VCPUHourly: base.VCPUHourly, RAMGBHourly: base.RAMGBHourly},
	} {
		_, err := DecodePriceSystem(priceapi.PriceSystemDocument(), "par", ref)
		var rej *RejectError
		if err == nil || errors.As(err, &rej) || !strings.Contains(err.Error(), "reference rates") {
			t.Errorf("reference %+v: error %v, want a reference error that is no *RejectError", ref, err)
		}
	}
}

func TestProductTopologies(t *testing.T) {
	doc := priceapi.ProductDocument()
	union, err := DecodeProduct(doc, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"2XL", "2XS", "L", "M", "S", "XL", "XS"}; !slices.Equal(union, want) {
		t.Fatalf("union %v, want %v", union, want)
	}
	aio, err := DecodeProduct(doc, "ALL_IN_ONE")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"L", "M", "S", "XL"}; !slices.Equal(aio, want) {
		t.Fatalf("ALL_IN_ONE %v, want %v", aio, want)
	}
	_, err = DecodeProduct(doc, "SHARED")
	if err == nil || !strings.Contains(err.Error(), `no topology "SHARED" (listed: ALL_IN_ONE, DEDICATED_COMPUTE, DISTRIBUTED)`) {
		t.Fatalf("unknown topology: %v", err)
	}
}

func TestProductRejections(t *testing.T) {
	tests := []struct {
		name, body, topology, field, why string
	}{
		{name: "not JSON", body: `{"topologies":[`, why: "malformed"},
		{name: "topologies missing", body: `{"versions":{}}`, field: "topologies", why: "missing"},
		{name: "topologies empty", body: `{"topologies":[]}`, field: "topologies", why: "empty"},
		{name: "null topology", body: `{"topologies":[null]}`, field: "topologies[0]", why: "null"},
		{name: "unnamed topology", body: `{"topologies":[{"availableFlavors":["M"]}]}`, field: "topologies[0].topology", why: "missing"},
		{name: "flavors missing", body: `{"topologies":[{"topology":"A"}]}`, field: `topologies["A"].availableFlavors`, why: "missing"},
		{name: "duplicate topology", body: `{"topologies":[{"topology":"A","availableFlavors":["M"]},{"topology":"A","availableFlavors":["S"]}]}`,
			field: `topologies["A"]`, why: "listed twice"},
		{name: "lowercase flavor", body: `{"topologies":[{"topology":"A","availableFlavors":["m"]}]}`,
			field: `topologies["A"].availableFlavors[0]`, why: `"m" is not a flavor name`},
		{name: "all empty", body: `{"topologies":[{"topology":"A","availableFlavors":[]}]}`, field: "topologies", why: "no topology lists any flavor"},
		{name: "selected empty", body: `{"topologies":[{"topology":"A","availableFlavors":[]},{"topology":"B","availableFlavors":["M"]}]}`,
			topology: "A", field: `topologies["A"].availableFlavors`, why: "empty"},
		{name: "bad entry elsewhere", body: `{"topologies":[{"topology":"A","availableFlavors":["M"]},{"topology":"B","availableFlavors":[""]}]}`,
			topology: "A", field: `topologies["B"].availableFlavors[0]`, why: "not a flavor name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeProduct([]byte(tt.body), tt.topology)
			if err == nil {
				t.Fatalf("accepted: %v", got)
			}
			var rej *RejectError
			if !errors.As(err, &rej) || rej.Field != tt.field || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("error %q, want field %q and %q", err, tt.field, tt.why)
			}
		})
	}
}
