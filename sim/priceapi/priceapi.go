// Package priceapi is a fake of Clever Cloud's public pricing API: the two documents the
// price refresher reads, /v4/kubernetes-product and /v4/billing/price-system.
//
// Like today's platform, the price system is public and the
// product listing answers 401 to a request without a token, which the refresher never has.
// The listing as it was served before 2026-09 (the "legacy" listing) stays available, with
// Options.LegacyProduct or SetLegacyProduct, for the scenarios that need flavor availability
// from the API (a flavor leaving the listing).
//
// The documents are shaped like the live ones (several topologies, a versions object, a
// price system with many unrelated services, eleven of them on tiered plans whose first tier
// is free) because the refresher's hardest job is to ignore everything that is not a
// Kubernetes node rate without being fooled by it. Tests and the simulated CKE flip it at
// run time into the failure modes the refresher must survive: HTTP 500, a stalled response,
// malformed JSON, an oversized body, a tiered Kubernetes plan, new rates, new flavor lists.
package priceapi

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Paths the fake serves, as the live API spells them.
const (
	ProductPath     = "/v4/kubernetes-product"
	PriceSystemPath = "/v4/billing/price-system"
)

// Service names of the two countables a Kubernetes node is billed with.
const (
	VCPUService = "kubernetes.node.vcpu"
	RAMService  = "kubernetes.node.ram"
)

//go:embed documents/*.json
var documents embed.FS

// ProductDocument is the pristine embedded /v4/kubernetes-product document.
func ProductDocument() []byte { return mustRead("documents/kubernetes-product.json") }

// PriceSystemDocument is the pristine embedded /v4/billing/price-system document (zone par).
func PriceSystemDocument() []byte { return mustRead("documents/price-system.json") }

func mustRead(name string) []byte {
	b, err := documents.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("priceapi: embedded document %s: %v", name, err))
	}
	return b
}

// Endpoint names one of the two documents, to aim a fault at it.
type Endpoint string

const (
	Product     Endpoint = "product"
	PriceSystem Endpoint = "price-system"
)

// Fault is how an endpoint misbehaves.
type Fault string

const (
	// Healthy serves the document.
	Healthy Fault = ""
	// ServerError answers HTTP 500.
	ServerError Fault = "error"
	// Stall never answers: the handler waits until the client gives up (its request context
	// is done) or the fake is closed.
	Stall Fault = "stall"
	// Malformed answers 200 with a truncated JSON document.
	Malformed Fault = "malformed"
	// Oversized answers 200 with a valid document padded past 2 MiB, more than any sane
	// client should read.
	Oversized Fault = "oversized"
)

// OversizedBytes is the least size of an Oversized answer.
const OversizedBytes = 2 << 20

// UnauthorizedBody is what the product listing answers, with HTTP 401, unless the legacy
// listing is on. It is an approximation of the live answer, shaped like the API's other
// errors ({"id", "message", "type"}); clients must rely on the status code only.
const UnauthorizedBody = `{"id":401,"message":"Unauthorized: this endpoint requires an OAuth token","type":"error"}`

// Options set the fake's initial state, which Reset returns to.
type Options struct {
	// LegacyProduct serves the product listing, as the API did before 2026-09, instead of
	// answering 401.
	LegacyProduct bool
}

// Topology is one entry of the kubernetes-product document.
type Topology struct {
	Topology         string   `json:"topology"`
	AvailableFlavors []string `json:"availableFlavors"`
}

// State is everything that can be switched on the fake. The zero value of a field never
// means "default": State() returns the full current state, edit it and SetState it back.
type State struct {
	// Faults maps an endpoint to its fault; an endpoint absent from the map is healthy.
	Faults map[Endpoint]Fault `json:"faults,omitempty"`
	// VCPUHourly and RAMGBHourly are the prices of the two Kubernetes node countables.
	VCPUHourly  float64 `json:"vcpuHourly"`
	RAMGBHourly float64 `json:"ramGBHourly"`
	// TieredKubernetes gives both Kubernetes node countables a free first tier, the trap a
	// parser taking the first plan falls into.
	TieredKubernetes bool `json:"tieredKubernetes"`
	// ZoneID and Currency are served as is, whatever zone_id the client asked for, so a test
	// can make them disagree with the client's expectations.
	ZoneID   string `json:"zoneID"`
	Currency string `json:"currency"`
	// Topologies are served in order, when the legacy listing is on.
	Topologies []Topology `json:"topologies"`
	// LegacyProduct serves the product listing; false answers 401 (UnauthorizedBody), as the
	// live API does since 2026-09. A fault set on the product endpoint wins over both.
	LegacyProduct bool `json:"legacyProduct"`
}

// Server is the fake API; it is an http.Handler and safe for concurrent use.
type Server struct {
	product     productDoc
	priceSystem priceSystemDoc
	options     Options

	mu       sync.Mutex
	state    State
	requests map[Endpoint]int
	closed   chan struct{}
	once     sync.Once
}

// New returns a fake of today's API: the embedded price system, healthy, and a product
// listing that answers 401.
func New() *Server { return NewWithOptions(Options{}) }

// NewWithOptions returns a fake serving the embedded documents, healthy, in the mode the
// options choose.
func NewWithOptions(o Options) *Server {
	s := &Server{requests: map[Endpoint]int{}, closed: make(chan struct{}), options: o}
	if err := json.Unmarshal(ProductDocument(), &s.product); err != nil {
		panic(fmt.Sprintf("priceapi: embedded product document: %v", err))
	}
	if err := json.Unmarshal(PriceSystemDocument(), &s.priceSystem); err != nil {
		panic(fmt.Sprintf("priceapi: embedded price-system document: %v", err))
	}
	s.state = s.initialState()
	return s
}

func (s *Server) initialState() State {
	st := State{
		Faults:     map[Endpoint]Fault{},
		ZoneID:     s.priceSystem.ZoneID,
		Currency:   s.priceSystem.Currency,
		Topologies: cloneTopologies(s.product.Topologies),
		// The listing's content is kept in both modes, so that switching to the legacy
		// listing at run time serves the embedded topologies.
		LegacyProduct: s.options.LegacyProduct,
	}
	for _, c := range s.priceSystem.Countable {
		switch c.Service {
		case VCPUService:
			st.VCPUHourly = c.Plans[0].Price
		case RAMService:
			st.RAMGBHourly = c.Plans[0].Price
		}
	}
	return st
}

// Reset puts the fake back to the embedded documents, healthy, in the mode New or
// NewWithOptions chose, and clears request counts.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = s.initialState()
	s.requests = map[Endpoint]int{}
}

// State returns a copy of the current state.
func (s *Server) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneState(s.state)
}

// SetState replaces the whole state.
func (s *Server) SetState(st State) {
	st = cloneState(st)
	if st.Faults == nil {
		st.Faults = map[Endpoint]Fault{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = st
}

func (s *Server) update(fn func(*State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.state)
}

// SetFault makes both endpoints misbehave the same way; Healthy heals them.
func (s *Server) SetFault(f Fault) {
	s.update(func(st *State) { st.Faults = map[Endpoint]Fault{Product: f, PriceSystem: f} })
}

// SetEndpointFault makes one endpoint misbehave.
func (s *Server) SetEndpointFault(e Endpoint, f Fault) {
	s.update(func(st *State) { st.Faults[e] = f })
}

// SetRates changes the prices of the Kubernetes node countables (EUR per vCPU per hour, EUR
// per nominal GB per hour).
func (s *Server) SetRates(vcpuHourly, ramGBHourly float64) {
	s.update(func(st *State) { st.VCPUHourly, st.RAMGBHourly = vcpuHourly, ramGBHourly })
}

// SetLegacyProduct serves the product listing as before 2026-09 (on) or answers 401 (off).
func (s *Server) SetLegacyProduct(on bool) {
	s.update(func(st *State) { st.LegacyProduct = on })
}

// SetTieredKubernetes gives (or removes) a free first tier on the Kubernetes node countables.
func (s *Server) SetTieredKubernetes(on bool) {
	s.update(func(st *State) { st.TieredKubernetes = on })
}

// SetZone changes the zone_id the price system reports.
func (s *Server) SetZone(zone string) { s.update(func(st *State) { st.ZoneID = zone }) }

// SetCurrency changes the currency the price system reports.
func (s *Server) SetCurrency(currency string) {
	s.update(func(st *State) { st.Currency = currency })
}

// SetAvailableFlavors replaces one topology's flavor list, appending the topology when it is
// new; a nil list removes the topology.
func (s *Server) SetAvailableFlavors(topology string, flavors []string) {
	s.update(func(st *State) {
		i := slices.IndexFunc(st.Topologies, func(t Topology) bool { return t.Topology == topology })
		switch {
		case flavors == nil && i >= 0:
			st.Topologies = slices.Delete(st.Topologies, i, i+1)
		case flavors == nil:
		case i >= 0:
			st.Topologies[i].AvailableFlavors = slices.Clone(flavors)
		default:
			st.Topologies = append(st.Topologies, Topology{Topology: topology, AvailableFlavors: slices.Clone(flavors)})
		}
	})
}

// Requests is how many requests an endpoint received since New or Reset, faults included.
func (s *Server) Requests(e Endpoint) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[e]
}

// Close releases every stalled request; the handler keeps serving afterwards.
func (s *Server) Close() { s.once.Do(func() { close(s.closed) }) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var e Endpoint
	switch r.URL.Path {
	case ProductPath:
		e = Product
	case PriceSystemPath:
		e = PriceSystem
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	s.requests[e]++
	st := cloneState(s.state)
	s.mu.Unlock()

	fault := st.Faults[e]
	switch fault {
	case ServerError:
		http.Error(w, `{"id":500,"message":"Internal server error","type":"error"}`, http.StatusInternalServerError)
		return
	case Stall:
		select {
		case <-r.Context().Done():
		case <-s.closed:
		}
		return
	}
	// Any fault on the product endpoint, malformed and oversized included, wins over the 401:
	// the faults exist to exercise the client, whatever the mode.
	if e == Product && !st.LegacyProduct && fault == Healthy {
		// RFC 9110 requires a challenge with a 401; the realm is illustrative.
		w.Header().Set("WWW-Authenticate", `OAuth realm="https://api.clever-cloud.com"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(UnauthorizedBody))
		return
	}

	var body []byte
	var err error
	if e == Product {
		body, err = s.renderProduct(st)
	} else {
		body, err = s.renderPriceSystem(st)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	switch fault {
	case Malformed:
		body = body[:len(body)/2]
	case Oversized:
		body = pad(body)
	}
	// The live API sends no cache validators; neither does the fake, so a client cannot rely
	// on conditional requests.
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// pad keeps the document valid JSON (whitespace before the closing brace) so that only the
// size cap can reject it.
func pad(body []byte) []byte {
	end := len(body) - 1
	for end > 0 && body[end] != '}' {
		end--
	}
	out := make([]byte, 0, len(body)+OversizedBytes)
	out = append(out, body[:end]...)
	out = append(out, make([]byte, OversizedBytes)...)
	for i := end; i < end+OversizedBytes; i++ {
		out[i] = ' '
	}
	return append(out, body[end:]...)
}

type productDoc struct {
	Topologies []Topology       `json:"topologies"`
	Versions   *json.RawMessage `json:"versions,omitempty"`
}

type priceSystemDoc struct {
	ZoneID    string            `json:"zone_id"`
	Currency  string            `json:"currency"`
	Runtime   []json.RawMessage `json:"runtime"`
	Countable []countable       `json:"countable"`
}

type countable struct {
	ID       string        `json:"countable_policy_id"`
	Service  string        `json:"service"`
	DataUnit string        `json:"data_unit"`
	Quantity billable      `json:"data_quantity_for_price"`
	Interval *billableTime `json:"time_interval_for_price,omitempty"`
	Plans    []plan        `json:"price_plans"`
}

type billable struct {
	Secability string  `json:"secability"`
	Quantity   float64 `json:"quantity"`
}

type billableTime struct {
	Secability string `json:"secability"`
	Interval   string `json:"interval"`
}

type plan struct {
	ID          string   `json:"plan_id"`
	MaxQuantity *float64 `json:"max_quantity,omitempty"`
	Price       float64  `json:"price"`
}

func (s *Server) renderProduct(st State) ([]byte, error) {
	doc := productDoc{Topologies: st.Topologies, Versions: s.product.Versions}
	if doc.Topologies == nil {
		doc.Topologies = []Topology{}
	}
	return json.MarshalIndent(doc, "", "  ")
}

func (s *Server) renderPriceSystem(st State) ([]byte, error) {
	doc := s.priceSystem
	doc.ZoneID, doc.Currency = st.ZoneID, st.Currency
	doc.Countable = make([]countable, len(s.priceSystem.Countable))
	for i, c := range s.priceSystem.Countable {
		rate := 0.0
		switch c.Service {
		case VCPUService:
			rate = st.VCPUHourly
		case RAMService:
			rate = st.RAMGBHourly
		default:
			doc.Countable[i] = c
			continue
		}
		id := c.Plans[0].ID
		c.Plans = []plan{{ID: id, Price: rate}}
		if st.TieredKubernetes {
			// Four units free, as the other services' free tiers look: enough for a parser
			// that reads the first plan to price every node at zero.
			free := 4 * c.Quantity.Quantity
			c.Plans = []plan{{ID: id + "-free", MaxQuantity: &free, Price: 0}, {ID: id, Price: rate}}
		}
		doc.Countable[i] = c
	}
	return json.MarshalIndent(doc, "", "  ")
}

func cloneTopologies(ts []Topology) []Topology {
	if ts == nil {
		return nil
	}
	out := make([]Topology, len(ts))
	for i, t := range ts {
		out[i] = Topology{Topology: t.Topology, AvailableFlavors: slices.Clone(t.AvailableFlavors)}
	}
	return out
}

func cloneState(st State) State {
	out := st
	out.Topologies = cloneTopologies(st.Topologies)
	out.Faults = make(map[Endpoint]Fault, len(st.Faults))
	for k, v := range st.Faults {
		out.Faults[k] = v
	}
	return out
}

// Running is a fake listening on a real TCP address.
type Running struct {
	*Server
	// URL is the base URL to give the refresher as PRICING_API_URL, e.g. http://127.0.0.1:41234.
	URL string
	srv *http.Server
	ln  net.Listener
}

// Start serves a new fake of today's API on addr ("127.0.0.1:0" picks a free port) until
// Close.
func Start(addr string) (*Running, error) { return StartWithOptions(addr, Options{}) }

// StartWithOptions is Start with the fake's initial mode.
func StartWithOptions(addr string, o Options) (*Running, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("priceapi: listen on %s: %w", addr, err)
	}
	s := NewWithOptions(o)
	r := &Running{
		Server: s,
		URL:    "http://" + strings.Replace(ln.Addr().String(), "[::]", "127.0.0.1", 1),
		srv:    &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second},
		ln:     ln,
	}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Close stops serving, releasing stalled requests first so that shutdown cannot hang on them.
func (r *Running) Close() error {
	r.Server.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("priceapi: shutdown: %w", err)
	}
	return nil
}
