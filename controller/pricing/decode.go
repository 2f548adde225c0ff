package pricing

import (
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/pricing/pricedoc"
)

// The decoders live in pricedoc, which links nothing but the standard library so that they
// fuzz fast; this file re-exports them in the catalogue's types.

// RejectError is a document the provider refuses to use; it names the field and the reason.
type RejectError = pricedoc.RejectError

// DecodeProduct reads a /v4/kubernetes-product document: the sorted available flavors, the
// union of every topology's list when topology is empty, that topology's list otherwise.
func DecodeProduct(body []byte, topology string) ([]string, error) {
	return pricedoc.DecodeProduct(body, topology)
}

// DecodePriceSystem reads a /v4/billing/price-system document for zone and returns the
// validated Kubernetes node rates; reference, the base catalogue's rates, centres the sanity
// band and fixes the currency.
func DecodePriceSystem(body []byte, zone string, reference catalog.Rates) (catalog.Rates, error) {
	r, err := pricedoc.DecodePriceSystem(body, zone, toDoc(reference))
	if err != nil {
		return catalog.Rates{}, err
	}
	return fromDoc(r), nil
}

func toDoc(r catalog.Rates) pricedoc.Rates {
	return pricedoc.Rates{Currency: r.Currency, VCPUHourly: r.VCPUHourly, RAMGBHourly: r.RAMGBHourly}
}

func fromDoc(r pricedoc.Rates) catalog.Rates {
	return catalog.Rates{Currency: r.Currency, VCPUHourly: r.VCPUHourly, RAMGBHourly: r.RAMGBHourly}
}
