package pricedoc

import (
	"errors"
	"math"
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

func FuzzDecodePriceSystem(f *testing.F) {
	f.Add(priceapi.PriceSystemDocument())
	// Sizes of the base catalogue, hard-coded so that the fuzz loop touches no file: any
	// accepted document must price each of them above zero once rounded like the catalogue.
	sizes := [][2]int64{{4, 4}, {6, 8}, {8, 12}, {10, 16}, {12, 24}, {16, 32}}
	f.Fuzz(func(t *testing.T, body []byte) {
		rates, err := DecodePriceSystem(body, "par", Rates{})
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
		if rates.Currency != "EUR" {
			t.Fatalf("accepted currency %q", rates.Currency)
		}
		for _, r := range []struct {
			got, ref float64
		}{{rates.VCPUHourly, ReferenceRates.VCPUHourly}, {rates.RAMGBHourly, ReferenceRates.RAMGBHourly}} {
			if math.IsNaN(r.got) || math.IsInf(r.got, 0) || r.got <= 0 || r.got < r.ref/RateBandFactor || r.got > r.ref*RateBandFactor {
				t.Fatalf("accepted rate %v (reference %v)", r.got, r.ref)
			}
		}
		for _, s := range sizes {
			// Rounded to four decimals as the catalogue rounds prices.
			if p := math.Round((float64(s[0])*rates.VCPUHourly+float64(s[1])*rates.RAMGBHourly)*1e4) / 1e4; p <= 0 {
				t.Fatalf("accepted rates %+v price %d vCPU/%d GB at %v", rates, s[0], s[1], p)
			}
		}
	})
}
