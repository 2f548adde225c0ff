package priceapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func get(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
	return w
}

func decodePriceSystem(t *testing.T, body []byte) priceSystemDoc {
	t.Helper()
	var doc priceSystemDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("price system is not JSON: %v", err)
	}
	return doc
}

func kubernetesPlans(doc priceSystemDoc, service string) []plan {
	for _, c := range doc.Countable {
		if c.Service == service {
			return c.Plans
		}
	}
	return nil
}

// The refresher's tests rely on the documents looking like the live ones; pin the traits that
// matter so that nobody "simplifies" the fixture into something a naive parser would pass.
func TestDocumentsAreRealistic(t *testing.T) {
	s := NewWithOptions(Options{LegacyProduct: true})
	doc := decodePriceSystem(t, get(t, s, PriceSystemPath+"?zone_id=par").Body.Bytes())
	if doc.ZoneID != "par" || doc.Currency != "EUR" {
		t.Fatalf("zone %q currency %q, want par EUR", doc.ZoneID, doc.Currency)
	}
	tiered := 0
	for _, c := range doc.Countable {
		if len(c.Plans) > 1 && c.Plans[0].Price == 0 {
			tiered++
		}
	}
	if len(doc.Countable) != 29 || tiered != 11 {
		t.Fatalf("%d countables with %d free-first-tier plans, want 29 and 11", len(doc.Countable), tiered)
	}
	if p := kubernetesPlans(doc, VCPUService); len(p) != 1 || p[0].Price != 0.00277777777 {
		t.Fatalf("vcpu plans %+v", p)
	}
	if p := kubernetesPlans(doc, RAMService); len(p) != 1 || p[0].Price != 0.00555555555 {
		t.Fatalf("ram plans %+v", p)
	}

	var product productDoc
	if err := json.Unmarshal(get(t, s, ProductPath).Body.Bytes(), &product); err != nil {
		t.Fatal(err)
	}
	if len(product.Topologies) != 3 || product.Versions == nil {
		t.Fatalf("product %+v", product)
	}
}

func TestSwitches(t *testing.T) {
	s := NewWithOptions(Options{LegacyProduct: true})

	s.SetRates(0.004, 0.006)
	s.SetTieredKubernetes(true)
	doc := decodePriceSystem(t, get(t, s, PriceSystemPath).Body.Bytes())
	p := kubernetesPlans(doc, VCPUService)
	if len(p) != 2 || p[0].Price != 0 || p[1].Price != 0.004 || p[0].MaxQuantity == nil {
		t.Fatalf("tiered vcpu plans %+v", p)
	}
	if p := kubernetesPlans(doc, RAMService); len(p) != 2 || p[1].Price != 0.006 {
		t.Fatalf("tiered ram plans %+v", p)
	}

	s.SetAvailableFlavors("DISTRIBUTED", []string{"M"})
	s.SetAvailableFlavors("ALL_IN_ONE", nil)
	s.SetAvailableFlavors("NEW", []string{"XL"})
	var product productDoc
	if err := json.Unmarshal(get(t, s, ProductPath).Body.Bytes(), &product); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, tp := range product.Topologies {
		got[tp.Topology] = tp.AvailableFlavors
	}
	if len(got) != 3 || len(got["DISTRIBUTED"]) != 1 || got["NEW"][0] != "XL" || got["ALL_IN_ONE"] != nil {
		t.Fatalf("topologies %v", got)
	}

	s.SetEndpointFault(Product, ServerError)
	if w := get(t, s, ProductPath); w.Code != http.StatusInternalServerError {
		t.Fatalf("product status %d, want 500", w.Code)
	}
	if w := get(t, s, PriceSystemPath); w.Code != http.StatusOK {
		t.Fatalf("price system status %d, want 200", w.Code)
	}

	s.SetFault(Malformed)
	if json.Valid(get(t, s, PriceSystemPath).Body.Bytes()) {
		t.Fatal("malformed price system is valid JSON")
	}

	s.SetFault(Oversized)
	body := get(t, s, PriceSystemPath).Body.Bytes()
	if len(body) < OversizedBytes || !json.Valid(body) {
		t.Fatalf("oversized body: %d bytes, valid %v", len(body), json.Valid(body))
	}

	s.Reset()
	if st := s.State(); st.VCPUHourly != 0.00277777777 || st.TieredKubernetes || len(st.Faults) != 0 || s.Requests(Product) != 0 {
		t.Fatalf("reset state %+v", st)
	}
}

// Today's API answers 401 on the product listing to a client without a token; the legacy
// listing is a mode, chosen at construction (and kept by Reset) or switched at run time.
func TestProductListingAnswers401UnlessLegacy(t *testing.T) {
	s := New()
	w := get(t, s, ProductPath)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("product status %d, want 401", w.Code)
	}
	var body struct {
		ID      int    `json:"id"`
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.ID != 401 || body.Type != "error" || body.Message == "" {
		t.Fatalf("401 body %q (%v), want a JSON error", w.Body.String(), err)
	}
	if w.Header().Get("WWW-Authenticate") == "" || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("401 headers %v", w.Header())
	}
	if w := get(t, s, PriceSystemPath+"?zone_id=par"); w.Code != http.StatusOK {
		t.Fatalf("price system status %d, want 200 without a token", w.Code)
	}
	if s.Requests(Product) != 1 {
		t.Fatalf("%d product requests counted, want 1", s.Requests(Product))
	}

	s.SetLegacyProduct(true)
	var product productDoc
	if w := get(t, s, ProductPath); w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &product) != nil || len(product.Topologies) != 3 {
		t.Fatalf("legacy listing: status %d, body %q", w.Code, w.Body.String())
	}
	// A fault wins over either mode.
	s.SetLegacyProduct(false)
	s.SetEndpointFault(Product, ServerError)
	if w := get(t, s, ProductPath); w.Code != http.StatusInternalServerError {
		t.Fatalf("faulty product status %d, want 500", w.Code)
	}
	s.Reset()
	if w := get(t, s, ProductPath); w.Code != http.StatusUnauthorized || s.State().LegacyProduct {
		t.Fatalf("after Reset: status %d, want 401", w.Code)
	}

	legacy := NewWithOptions(Options{LegacyProduct: true})
	legacy.SetLegacyProduct(false)
	legacy.Reset()
	if w := get(t, legacy, ProductPath); w.Code != http.StatusOK {
		t.Fatalf("legacy fake after Reset: status %d, want 200", w.Code)
	}
}

func TestStallEndsWithRequestContext(t *testing.T) {
	s := New()
	s.SetFault(Stall)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, ProductPath, nil).WithContext(ctx))
	}()
	select {
	case <-done:
		t.Fatal("stalled request answered")
	default:
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("stalled request outlived its context")
	}
}

func TestStartServesTheStateOverHTTP(t *testing.T) {
	r, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	}()
	st := r.State()
	st.VCPUHourly = 0.005
	st.Faults = map[Endpoint]Fault{Product: Stall}
	st.LegacyProduct = true
	r.SetState(st)

	resp, err := http.Get(r.URL + PriceSystemPath + "?zone_id=par")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if p := kubernetesPlans(decodePriceSystem(t, b), VCPUService); len(p) != 1 || p[0].Price != 0.005 {
		t.Fatalf("vcpu plans over HTTP %+v", p)
	}

	// A stalled request in flight must not hang Close.
	go func() {
		if resp, err := http.Get(r.URL + ProductPath); err == nil {
			_ = resp.Body.Close()
		}
	}()
}
