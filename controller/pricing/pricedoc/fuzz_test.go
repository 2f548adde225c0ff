package pricedoc

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/priceapi"
)

// The fuzz targets run their seeds (the fake API's realistic documents plus testdata/fuzz)
// in every `go test`; `go test -fuzz FuzzDecodePriceSystem -fuzztime 10m` explores further.

func FuzzDecodeProduct(f *testing.F) {
	f.Add(priceapi.ProductDocument(), "")
	f.Add(priceapi.ProductDocument(), "ALL_IN_ONE")
	f.Add(priceapi.ProductDocument(), "NOPE")
	f.Fuzz(func(t *testing.T, body []byte, topology string) {
		got, err := DecodeProduct(body, topology)
		if err != nil {
			var rej *RejectError
			if !errors.As(err, &rej) || rej.Reason == "" {
				t.Fatalf("error %v is not a reasoned *RejectError", err)
			}
			if got != nil {
				t.Fatalf("rejected but returned %v", got)
			}
			return
		}
		if len(got) == 0 {
			t.Fatal("accepted an empty flavor list")
		}
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("not sorted and unique: %q", got)
		}
		for _, name := range got {
			if len(name) > maxFlavorNameLength || !flavorName.MatchString(name) {
				t.Fatalf("accepted flavor name %q", name)
			}
		}
	})
}

// baseCatalog is what the fuzz targets need of the base catalogue the controller embeds: the
// rates it hands the decoder as the reference, and each flavor's size. Read once, before the
// fuzz loop, so that the loop touches no file.
type baseCatalog struct {
	Rates struct {
		Currency    string  `json:"currency"`
		VCPUHourly  float64 `json:"vcpuHourly"`
		RAMGBHourly float64 `json:"ramGBHourly"`
	} `json:"rates"`
	Flavors []struct {
		CPU       int64 `json:"cpu"`
		NominalGB int64 `json:"nominalGB"`
	} `json:"flavors"`
}

func loadBaseCatalog(tb testing.TB) (Rates, baseCatalog) {
	tb.Helper()
	b, err := os.ReadFile("../../catalog/base.json")
	if err != nil {
		tb.Fatalf("reading the base catalogue: %v", err)
	}
	var base baseCatalog
	if err := json.Unmarshal(b, &base); err != nil {
		tb.Fatalf("decoding the base catalogue: %v", err)
	}
	return Rates{Currency: base.Rates.Currency, VCPUHourly: base.Rates.VCPUHourly, RAMGBHourly: base.Rates.RAMGBHourly}, base
}

func FuzzDecodePriceSystem(f *testing.F) {
	f.Add(priceapi.PriceSystemDocument())
	// Any accepted document must price each base flavor above zero once rounded like the
	// catalogue.
	reference, base := loadBaseCatalog(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rates, err := DecodePriceSystem(body, "par", reference)
		if err != nil {
			var rej *RejectError
			if !errors.As(err, &rej) || rej.Reason == "" {
				t.Fatalf("error %v is not a reasoned *RejectError", err)
			}
			if rates != (Rates{}) {
				t.Fatalf("rejected but returned %+v", rates)
			}
			return
		}
		if rates.Currency != reference.Currency {
			t.Fatalf("accepted currency %q", rates.Currency)
		}
		for _, r := range []struct {
			got, ref float64
		}{{rates.VCPUHourly, reference.VCPUHourly}, {rates.RAMGBHourly, reference.RAMGBHourly}} {
			if math.IsNaN(r.got) || math.IsInf(r.got, 0) || r.got <= 0 || r.got < r.ref/RateBandFactor || r.got > r.ref*RateBandFactor {
				t.Fatalf("accepted rate %v (reference %v)", r.got, r.ref)
			}
		}
		for _, s := range base.Flavors {
			// Rounded to four decimals as the catalogue rounds prices.
			if p := math.Round((float64(s.CPU)*rates.VCPUHourly+float64(s.NominalGB)*rates.RAMGBHourly)*1e4) / 1e4; p <= 0 {
				t.Fatalf("accepted rates %+v price %d vCPU/%d GB at %v", rates, s.CPU, s.NominalGB, p)
			}
		}
	})
}
