// Package pricedoc decodes and validates the two documents of Clever Cloud's public pricing
// API: /v4/kubernetes-product (available flavors) and /v4/billing/price-system (rates).
//
// Prices drive every consolidation decision, so a wrong price is an outage in slow motion:
// a free price moves the whole fleet onto one flavor, an absurd one freezes consolidation.
// The decoders therefore trust nothing: a document is used only when every field the
// provider depends on is exactly what it expects, and otherwise rejected with an error that
// names the field and the reason.
//
// The package depends on the standard library only, on purpose: `go test -fuzz` instruments
// every package linked into the test binary, and linking Kubernetes and controller-runtime
// slows fuzzing to a handful of executions per second.
package pricedoc

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Names of the two countables a Kubernetes node is billed with, and what each one must
// count: rates are per vCPU and per nominal GB (10^9 bytes), per hour.
const (
	VCPUService  = "kubernetes.node.vcpu"
	VCPUUnit     = "vcpu"
	VCPUQuantity = 1

	RAMService  = "kubernetes.node.ram"
	RAMUnit     = "B"
	RAMQuantity = 1_000_000_000

	// HourlyInterval is the only billing interval the rates may be given for, when the
	// countable states one at all; any other would silently scale every price.
	HourlyInterval = "PT1H"
)

// RateBandFactor bounds how far a live rate may drift from the reference (base catalogue)
// rate: it must lie within [reference/RateBandFactor, reference×RateBandFactor]. A price
// change beyond ×5 either way is far more likely a unit or parsing error upstream than a
// real repricing, and acting on it would reshuffle the fleet; an operator who wants such a
// price pins it with a flavor override instead. The lower bound also guarantees that every
// base flavor still prices above zero after rounding to four decimals.
const RateBandFactor = 5.0

// Caps on the product document, so that a runaway answer cannot grow the catalogue without
// bound. The live document lists three topologies of at most six flavors.
const (
	maxTopologies        = 64
	maxFlavorsPerTopo    = 256
	maxFlavorNameLength  = 32
	documentProduct      = "kubernetes-product"
	documentPriceSystem  = "price-system"
	maxTopologyNameBytes = 64
)

// Rates are the per-resource rates read from the price system; they mirror catalog.Rates,
// which this package cannot import without dragging Kubernetes into the fuzz targets.
type Rates struct {
	// Currency of the rates, e.g. "EUR".
	Currency string
	// VCPUHourly is the price of one vCPU for one hour.
	VCPUHourly float64
	// RAMGBHourly is the price of one nominal GB of memory for one hour.
	RAMGBHourly float64
}

// CheckReference says whether rates can centre the sanity band: they need a currency, and
// rates that are positive and finite.
func CheckReference(r Rates) error {
	for _, rate := range []float64{r.VCPUHourly, r.RAMGBHourly} {
		if !(rate > 0) || math.IsInf(rate, 0) {
			return fmt.Errorf("reference rates %+v: a currency and positive, finite rates are required", r)
		}
	}
	if r.Currency == "" {
		return fmt.Errorf("reference rates %+v: a currency and positive, finite rates are required", r)
	}
	return nil
}

// flavorName is the shape the NodeGroup API accepts (see catalog.Flavor in the controller).
var flavorName = regexp.MustCompile(`^[A-Z0-9][A-Z0-9_-]*$`)

// RejectError is a document the provider refuses to use.
type RejectError struct {
	// Document is "kubernetes-product" or "price-system".
	Document string
	// Field is where the problem is, as a JSON path, e.g. countable[kubernetes.node.ram].data_unit.
	Field string
	// Reason says what is wrong.
	Reason string
	// Malformed is true when the document is not the JSON shape expected at all, as opposed
	// to well-formed but unacceptable.
	Malformed bool
}

func (e *RejectError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s document rejected: %s", e.Document, e.Reason)
	}
	return fmt.Sprintf("%s document rejected: %s: %s", e.Document, e.Field, e.Reason)
}

// Kind is "malformed" for a document that is not the expected JSON shape, "invalid" for a
// well-formed one that fails validation; metrics count them apart.
func (e *RejectError) Kind() string {
	if e.Malformed {
		return KindMalformed
	}
	return KindInvalid
}

// Kinds of rejection.
const (
	KindMalformed = "malformed"
	KindInvalid   = "invalid"
)

func reject(doc, field, format string, args ...any) *RejectError {
	return &RejectError{Document: doc, Field: field, Reason: fmt.Sprintf(format, args...)}
}

func malformed(doc, field string, err error) *RejectError {
	return &RejectError{Document: doc, Field: field, Reason: "malformed JSON: " + err.Error(), Malformed: true}
}

type productDocument struct {
	Topologies *[]*productTopology `json:"topologies"`
}

type productTopology struct {
	Topology         *string   `json:"topology"`
	AvailableFlavors *[]string `json:"availableFlavors"`
}

// DecodeProduct reads a /v4/kubernetes-product document and returns the available flavors,
// sorted and without duplicates: the union of every topology's list when topology is empty,
// that topology's list otherwise. The per-topology lists are a product listing rather than
// an admission rule, which is why the union is the default.
//
// The whole document is validated even when one topology is selected, so that a document
// that is wrong somewhere is not half-trusted. An empty result is rejected: it would
// withdraw every flavor, which no real listing means.
func DecodeProduct(body []byte, topology string) ([]string, error) {
	var doc productDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, malformed(documentProduct, "", err)
	}
	if doc.Topologies == nil {
		return nil, reject(documentProduct, "topologies", "missing")
	}
	topos := *doc.Topologies
	if len(topos) == 0 {
		return nil, reject(documentProduct, "topologies", "empty")
	}
	if len(topos) > maxTopologies {
		return nil, reject(documentProduct, "topologies", "%d entries, more than the %d accepted", len(topos), maxTopologies)
	}
	seen := make(map[string]bool, len(topos))
	var union, selected []string
	found := false
	for i, t := range topos {
		field := fmt.Sprintf("topologies[%d]", i)
		if t == nil {
			return nil, reject(documentProduct, field, "null")
		}
		if t.Topology == nil || *t.Topology == "" {
			return nil, reject(documentProduct, field+".topology", "missing or empty")
		}
		name := *t.Topology
		if len(name) > maxTopologyNameBytes {
			return nil, reject(documentProduct, field+".topology", "longer than %d bytes", maxTopologyNameBytes)
		}
		field = fmt.Sprintf("topologies[%q]", name)
		if seen[name] {
			return nil, reject(documentProduct, field, "listed twice")
		}
		seen[name] = true
		if t.AvailableFlavors == nil {
			return nil, reject(documentProduct, field+".availableFlavors", "missing")
		}
		flavors := *t.AvailableFlavors
		if len(flavors) > maxFlavorsPerTopo {
			return nil, reject(documentProduct, field+".availableFlavors", "%d flavors, more than the %d accepted", len(flavors), maxFlavorsPerTopo)
		}
		for j, f := range flavors {
			if len(f) > maxFlavorNameLength || !flavorName.MatchString(f) {
				return nil, reject(documentProduct, fmt.Sprintf("%s.availableFlavors[%d]", field, j),
					"%q is not a flavor name (uppercase letters, digits, '-' or '_', at most %d characters)", f, maxFlavorNameLength)
			}
		}
		union = append(union, flavors...)
		if name == topology {
			found = true
			selected = slices.Clone(flavors)
		}
	}
	result := union
	if topology != "" {
		if !found {
			known := make([]string, 0, len(seen))
			for n := range seen {
				known = append(known, n)
			}
			slices.Sort(known)
			return nil, reject(documentProduct, "topologies", "no topology %q (listed: %s); check CLEVER_CLOUD_TOPOLOGY", topology, strings.Join(known, ", "))
		}
		result = selected
	}
	slices.Sort(result)
	result = slices.Compact(result)
	if len(result) == 0 {
		if topology != "" {
			return nil, reject(documentProduct, fmt.Sprintf("topologies[%q].availableFlavors", topology), "empty")
		}
		return nil, reject(documentProduct, "topologies", "no topology lists any flavor")
	}
	return result, nil
}

type priceSystemDocument struct {
	ZoneID    *string            `json:"zone_id"`
	Currency  *string            `json:"currency"`
	Countable *[]json.RawMessage `json:"countable"`
}

type countableHeader struct {
	Service json.RawMessage `json:"service"`
}

type countable struct {
	Service  string  `json:"service"`
	DataUnit *string `json:"data_unit"`
	Quantity *struct {
		Quantity *float64 `json:"quantity"`
	} `json:"data_quantity_for_price"`
	Interval *struct {
		Interval *string `json:"interval"`
	} `json:"time_interval_for_price"`
	Plans *[]*struct {
		Price *float64 `json:"price"`
	} `json:"price_plans"`
}

// DecodePriceSystem reads a /v4/billing/price-system document and returns the vCPU and RAM
// rates of a Kubernetes node. zone is the zone_id that was asked for; reference are the
// rates the sanity band is centred on (the base catalogue's), and their currency is the only
// one accepted. A reference without a currency or a positive, finite rate is the caller's
// error, not the document's: it is not a *RejectError.
//
// Only the two Kubernetes node countables are decoded: the document carries many other
// services, and one of them changing shape must not stop node pricing. Those two must be
// exact: unit, quantity, an hourly interval if one is stated, exactly one price plan, and a
// positive rate within RateBandFactor of the reference.
func DecodePriceSystem(body []byte, zone string, reference Rates) (Rates, error) {
	if err := CheckReference(reference); err != nil {
		return Rates{}, err
	}
	var doc priceSystemDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return Rates{}, malformed(documentPriceSystem, "", err)
	}
	switch {
	case doc.ZoneID == nil:
		return Rates{}, reject(documentPriceSystem, "zone_id", "missing")
	case *doc.ZoneID != zone:
		return Rates{}, reject(documentPriceSystem, "zone_id", "%q, asked for %q", *doc.ZoneID, zone)
	case doc.Currency == nil:
		return Rates{}, reject(documentPriceSystem, "currency", "missing")
	case *doc.Currency != reference.Currency:
		return Rates{}, reject(documentPriceSystem, "currency", "%q, only %q is accepted", *doc.Currency, reference.Currency)
	case doc.Countable == nil:
		return Rates{}, reject(documentPriceSystem, "countable", "missing")
	}

	found := map[string][]json.RawMessage{}
	for _, raw := range *doc.Countable {
		var h countableHeader
		// Unrelated countables may be any shape; only ours must parse.
		if json.Unmarshal(raw, &h) != nil {
			continue
		}
		var service string
		if json.Unmarshal(h.Service, &service) != nil {
			continue
		}
		if service == VCPUService || service == RAMService {
			found[service] = append(found[service], raw)
		}
	}

	vcpu, err := countableRate(found[VCPUService], VCPUService, VCPUUnit, VCPUQuantity, reference.VCPUHourly)
	if err != nil {
		return Rates{}, err
	}
	ram, err := countableRate(found[RAMService], RAMService, RAMUnit, RAMQuantity, reference.RAMGBHourly)
	if err != nil {
		return Rates{}, err
	}
	return Rates{Currency: reference.Currency, VCPUHourly: vcpu, RAMGBHourly: ram}, nil
}

// number spells a float as JSON would, not in Go's exponent notation, so that an error
// reads "1073741824, want 1000000000".
func number(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func countableRate(raws []json.RawMessage, service, unit string, quantity, reference float64) (float64, error) {
	field := fmt.Sprintf("countable[%s]", service)
	switch len(raws) {
	case 0:
		return 0, reject(documentPriceSystem, field, "missing")
	case 1:
	default:
		return 0, reject(documentPriceSystem, field, "listed %d times", len(raws))
	}
	var c countable
	if err := json.Unmarshal(raws[0], &c); err != nil {
		return 0, malformed(documentPriceSystem, field, err)
	}
	switch {
	case c.DataUnit == nil:
		return 0, reject(documentPriceSystem, field+".data_unit", "missing")
	case *c.DataUnit != unit:
		return 0, reject(documentPriceSystem, field+".data_unit", "%q, want %q", *c.DataUnit, unit)
	case c.Quantity == nil || c.Quantity.Quantity == nil:
		return 0, reject(documentPriceSystem, field+".data_quantity_for_price.quantity", "missing")
	case *c.Quantity.Quantity != quantity:
		return 0, reject(documentPriceSystem, field+".data_quantity_for_price.quantity", "%s, want %s", number(*c.Quantity.Quantity), number(quantity))
	case c.Interval != nil && (c.Interval.Interval == nil || *c.Interval.Interval != HourlyInterval):
		got := "missing"
		if c.Interval.Interval != nil {
			got = fmt.Sprintf("%q", *c.Interval.Interval)
		}
		return 0, reject(documentPriceSystem, field+".time_interval_for_price.interval", "%s, want %q", got, HourlyInterval)
	case c.Plans == nil:
		return 0, reject(documentPriceSystem, field+".price_plans", "missing")
	case len(*c.Plans) == 0:
		return 0, reject(documentPriceSystem, field+".price_plans", "empty")
	case len(*c.Plans) > 1:
		return 0, reject(documentPriceSystem, field+".price_plans",
			"%d plans: a tiered plan is not a flat node rate (its first tier is typically free), refusing to pick one", len(*c.Plans))
	}
	plan := (*c.Plans)[0]
	if plan == nil || plan.Price == nil {
		return 0, reject(documentPriceSystem, field+".price_plans[0].price", "missing")
	}
	price := *plan.Price
	lo, hi := reference/RateBandFactor, reference*RateBandFactor
	switch {
	case math.IsNaN(price) || math.IsInf(price, 0):
		return 0, reject(documentPriceSystem, field+".price_plans[0].price", "not a finite number")
	case price <= 0:
		return 0, reject(documentPriceSystem, field+".price_plans[0].price", "%v, must be positive", price)
	case price < lo || price > hi:
		return 0, reject(documentPriceSystem, field+".price_plans[0].price",
			"%v is outside the sane band [%v, %v] (×1/%v…×%v the reference %v); pin a flavor override if the price really changed that much",
			price, lo, hi, RateBandFactor, RateBandFactor, reference)
	}
	return price, nil
}
