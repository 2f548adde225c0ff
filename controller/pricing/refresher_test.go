package pricing

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/version"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/priceapi"
)

const period = 12 * time.Hour

// harness is a refresher wired to the fake price API over real HTTP, with a fake clock and a
// sink that records what it is given.
type harness struct {
	t       *testing.T
	api     *priceapi.Server
	clock   *testingclock.FakeClock
	r       *Refresher
	updates chan Update
	timers  chan time.Duration // every delay the loop arms, in order

	mu         sync.Mutex
	sinkErr    error
	userAgents []string
	zoneIDs    []string
}

func newHarness(t *testing.T, edit func(*settings.Settings), opts ...Option) *harness {
	t.Helper()
	h := &harness{
		t:       t,
		api:     priceapi.New(),
		clock:   testingclock.NewFakeClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)),
		updates: make(chan Update, 32),
		timers:  make(chan time.Duration, 32),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.mu.Lock()
		h.userAgents = append(h.userAgents, req.Header.Get("User-Agent"))
		if req.URL.Path == priceapi.PriceSystemPath {
			h.zoneIDs = append(h.zoneIDs, req.URL.Query().Get("zone_id"))
		}
		h.mu.Unlock()
		h.api.ServeHTTP(w, req)
	}))
	// Release stalled handlers before the server waits for them.
	t.Cleanup(srv.Close)
	t.Cleanup(h.api.Close)

	s := settingsFor(srv.URL)
	if edit != nil {
		edit(&s)
	}
	// A fixed jitter draw of 0.5 is no jitter at all: every delay below is exact.
	opts = append([]Option{WithJitterSource(func() float64 { return 0.5 })}, opts...)
	r, err := New(s, loadBase(t).Rates, srv.Client(), recordingClock{h.clock, h.timers}, func(_ context.Context, u Update) error {
		h.mu.Lock()
		err := h.sinkErr
		h.mu.Unlock()
		if err != nil {
			return err
		}
		h.updates <- u
		return nil
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	return h
}

// recordingClock is the fake clock, telling the test every timer the refresher arms.
type recordingClock struct {
	*testingclock.FakeClock
	timers chan<- time.Duration
}

// NewTimer reports d only once the timer is armed, so that a Step right after cannot miss it.
func (c recordingClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.timers <- d
	return t
}

func settingsFor(apiURL string) settings.Settings {
	s := settings.Defaults()
	s.Pricing.APIURL = apiURL
	s.Pricing.RefreshPeriod.Duration = period
	return s
}

func (h *harness) setSinkErr(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sinkErr = err
}

// start runs the refresher until the test ends.
func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.r.Start(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				h.t.Errorf("Start returned %v", err)
			}
		case <-time.After(10 * time.Second):
			h.t.Error("Start did not return after cancel")
		}
	})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// scheduled waits for the running loop to finish an attempt, which it ends by arming its
// timer, and returns the delay it armed. Watching NewTimer, rather than the fake clock's
// waiters, cannot be fooled by an attempt so quick that it re-arms between two looks.
func (h *harness) scheduled() time.Duration {
	h.t.Helper()
	select {
	case d := <-h.timers:
		return d
	case <-time.After(10 * time.Second):
		h.t.Fatal("the refresher did not schedule its next attempt")
		return 0
	}
}

// expectScheduled waits for the current attempt to end and checks the delay it armed.
func (h *harness) expectScheduled(d time.Duration) {
	h.t.Helper()
	if got := h.scheduled(); got != d {
		h.t.Fatalf("next attempt in %v, want %v", got, d)
	}
}

func (h *harness) update() Update {
	h.t.Helper()
	select {
	case u := <-h.updates:
		return u
	case <-time.After(10 * time.Second):
		h.t.Fatal("no update reached the sink")
		return Update{}
	}
}

func (h *harness) noUpdate() {
	h.t.Helper()
	select {
	case u := <-h.updates:
		h.t.Fatalf("unexpected update %+v", u)
	default:
	}
}

func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	t.Fatalf("metric %v is neither counter nor gauge", m.Desc())
	return 0
}

var unionFlavors = []string{"2XL", "2XS", "L", "M", "S", "XL", "XS"}

func TestRefresherScheduleRetryAndRecovery(t *testing.T) {
	h := newHarness(t, nil)
	statusFailures := refreshFailures.WithLabelValues(EndpointPriceSystem, ReasonStatus)
	before := value(t, statusFailures)
	h.start()

	// Refreshes at once, with the realistic documents priced exactly, on today's API: the
	// listing answers 401 and every catalogue flavor stays offered.
	u := h.update()
	if u.Rates != loadBase(t).Rates || u.Available != nil {
		t.Fatalf("first update %+v", u)
	}
	if got := price(u.Rates, 10, 16); got != 0.1167 {
		t.Fatalf("M priced %v, want 0.1167", got)
	}
	// The outcome is recorded once the next attempt is scheduled, a period later.
	h.expectScheduled(period)
	start := h.r.Status().LastSuccess
	if !start.Equal(h.clock.Now()) || h.r.Status().Stale {
		t.Fatalf("after success: last %v stale %v", start, h.r.Status().Stale)
	}
	h.clock.Step(period)
	h.update()
	h.expectScheduled(period)

	// The API breaks: nothing reaches the sink, and retries come sooner and sooner apart,
	// never later than RetryMax.
	h.api.SetEndpointFault(priceapi.PriceSystem, priceapi.ServerError)
	lastGood := h.r.Status().LastSuccess
	h.clock.Step(period)
	retries := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for i, d := range retries {
		h.expectScheduled(d)
		h.noUpdate()
		if i < len(retries)-1 {
			h.clock.Step(d)
		}
	}
	if got := value(t, statusFailures) - before; got != float64(len(retries)) {
		t.Fatalf("%v status failures counted, want %d", got, len(retries))
	}
	if got := value(t, consecutiveFailures); got != float64(len(retries)) {
		t.Fatalf("consecutive failures gauge %v, want %d", got, len(retries))
	}
	if !h.r.Status().LastSuccess.Equal(lastGood) || h.r.Status().LastError == nil {
		t.Fatalf("last good state not kept: last success %v, error %v", h.r.Status().LastSuccess, h.r.Status().LastError)
	}

	// It heals with new rates: applied at the next retry, and the schedule is back to the period.
	h.api.SetEndpointFault(priceapi.PriceSystem, priceapi.Healthy)
	h.api.SetRates(0.004, 0.006)
	h.clock.Step(RetryMax)
	if u := h.update(); u.Rates.VCPUHourly != 0.004 || u.Rates.RAMGBHourly != 0.006 {
		t.Fatalf("healed update %+v", u)
	}
	h.expectScheduled(period)
	if value(t, ratesInUse.WithLabelValues(ResourceVCPU)) != 0.004 || value(t, consecutiveFailures) != 0 {
		t.Fatal("metrics do not show the healed state")
	}
	if got := value(t, lastSuccess); got != float64(h.clock.Now().Unix()) {
		t.Fatalf("last success gauge %v, want %v", got, h.clock.Now().Unix())
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ua := range h.userAgents {
		if ua != version.UserAgent() {
			t.Fatalf("User-Agent %q, want %q", ua, version.UserAgent())
		}
	}
	for _, z := range h.zoneIDs {
		if z != "par" {
			t.Fatalf("zone_id %q, want par", z)
		}
	}
}

func TestRefresherRejectsAndKeepsLastGood(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(*settings.Settings)
		break_   func(h *harness)
		endpoint string
		reason   string
		inError  string
	}{
		{name: "price system 500", break_: func(h *harness) { h.api.SetEndpointFault(priceapi.PriceSystem, priceapi.ServerError) },
			endpoint: EndpointPriceSystem, reason: ReasonStatus, inError: "want 200"},
		{name: "malformed price system", break_: func(h *harness) { h.api.SetEndpointFault(priceapi.PriceSystem, priceapi.Malformed) },
			endpoint: EndpointPriceSystem, reason: ReasonMalformed, inError: "malformed JSON"},
		{name: "oversized", break_: func(h *harness) { h.api.SetEndpointFault(priceapi.PriceSystem, priceapi.Oversized) },
			endpoint: EndpointPriceSystem, reason: ReasonTooLarge, inError: "more than the 1048576 bytes accepted"},
		{name: "stalled", break_: func(h *harness) { h.api.SetEndpointFault(priceapi.PriceSystem, priceapi.Stall) },
			endpoint: EndpointPriceSystem, reason: ReasonTimeout, inError: "deadline exceeded"},
		{name: "tiered kubernetes plan", break_: func(h *harness) { h.api.SetTieredKubernetes(true) },
			endpoint: EndpointPriceSystem, reason: ReasonInvalid, inError: "countable[kubernetes.node.vcpu].price_plans: 2 plans"},
		{name: "absurd rate", break_: func(h *harness) { h.api.SetRates(0.00277777777, 5.0) },
			endpoint: EndpointPriceSystem, reason: ReasonInvalid, inError: "outside the sane band"},
		{name: "wrong zone", break_: func(h *harness) { h.api.SetZone("rbx") },
			endpoint: EndpointPriceSystem, reason: ReasonInvalid, inError: `zone_id: "rbx", asked for "par"`},
		{name: "wrong currency", break_: func(h *harness) { h.api.SetCurrency("USD") },
			endpoint: EndpointPriceSystem, reason: ReasonInvalid, inError: `currency: "USD"`},
		{name: "catalogue refuses", break_: func(h *harness) { h.setSinkErr(errors.New("no flavor left")) },
			endpoint: EndpointCatalog, reason: ReasonSink, inError: "no flavor left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.edit, WithRequestTimeout(2*time.Second))
			ctx := context.Background()
			if err := h.r.Refresh(ctx); err != nil {
				t.Fatalf("healthy refresh: %v", err)
			}
			good := h.update()
			lastGood := h.r.Status().LastSuccess

			failures := refreshFailures.WithLabelValues(tt.endpoint, tt.reason)
			before := value(t, failures)
			tt.break_(h)
			h.clock.Step(time.Hour)
			err := h.r.Refresh(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.inError) {
				t.Fatalf("error %v, want one saying %q", err, tt.inError)
			}
			if re := classify("", err); re.endpoint != tt.endpoint || re.reason != tt.reason {
				t.Fatalf("classified %s/%s, want %s/%s", re.endpoint, re.reason, tt.endpoint, tt.reason)
			}
			if got := value(t, failures) - before; got != 1 {
				t.Fatalf("failures{%s,%s} rose by %v, want 1", tt.endpoint, tt.reason, got)
			}
			h.noUpdate()
			if !h.r.Status().LastSuccess.Equal(lastGood) || h.r.Status().LastError == nil {
				t.Fatal("the failed refresh replaced the last good state")
			}
			if value(t, ratesInUse.WithLabelValues(ResourceVCPU)) != good.Rates.VCPUHourly {
				t.Fatal("rates metric moved on a failed refresh")
			}
		})
	}
}

func TestRefresherTopology(t *testing.T) {
	h := newHarness(t, func(s *settings.Settings) { s.Topology = "ALL_IN_ONE" })
	h.api.SetLegacyProduct(true)
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if u := h.update(); !slices.Equal(u.Available, []string{"L", "M", "S", "XL"}) {
		t.Fatalf("ALL_IN_ONE available %v", u.Available)
	}
	// Only the selected topology's changes matter.
	h.api.SetAvailableFlavors("DISTRIBUTED", []string{"2XS"})
	h.api.SetAvailableFlavors("ALL_IN_ONE", []string{"M", "L"})
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if u := h.update(); !slices.Equal(u.Available, []string{"L", "M"}) {
		t.Fatalf("restricted available %v", u.Available)
	}

	union := newHarness(t, nil)
	union.api.SetLegacyProduct(true)
	union.api.SetAvailableFlavors("EDGE", []string{"3XS"})
	if err := union.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if u := union.update(); !slices.Equal(u.Available, append([]string{"2XL", "2XS", "3XS"}, unionFlavors[2:]...)) {
		t.Fatalf("union available %v", u.Available)
	}
}

func TestStale(t *testing.T) {
	h := newHarness(t, nil)
	if h.r.Status().Stale {
		t.Fatal("stale before any attempt")
	}
	h.api.SetFault(priceapi.ServerError)
	if err := h.r.Refresh(context.Background()); err == nil {
		t.Fatal("refresh against a failing API succeeded")
	}
	if !h.r.Status().Stale || !h.r.Status().LastSuccess.IsZero() {
		t.Fatal("not stale after the first attempt failed")
	}
	h.api.SetFault(priceapi.Healthy)
	if err := h.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.r.Status().Stale {
		t.Fatal("stale right after a success")
	}
	h.api.SetFault(priceapi.ServerError)
	h.clock.Step(StaleAfterPeriods * period)
	_ = h.r.Refresh(context.Background())
	if h.r.Status().Stale {
		t.Fatal("stale at exactly two periods")
	}
	h.clock.Step(time.Nanosecond)
	if !h.r.Status().Stale {
		t.Fatal("not stale past two periods without success")
	}
}

func TestStartStopsCleanlyWhileStalled(t *testing.T) {
	h := newHarness(t, nil)
	h.api.SetFault(priceapi.Stall)
	timeouts := refreshFailures.WithLabelValues(EndpointPriceSystem, ReasonTimeout)
	requests := refreshFailures.WithLabelValues(EndpointPriceSystem, ReasonRequest)
	beforeT, beforeR := value(t, timeouts), value(t, requests)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.r.Start(ctx) }()
	// The listing is read first: a stall there holds the refresh until the request timeout.
	eventually(t, "the stalled request to arrive", func() bool { return h.api.Requests(priceapi.Product) > 0 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Start returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after cancel")
	}
	// Losing the lease or shutting down is not an API failure.
	if value(t, timeouts) != beforeT || value(t, requests) != beforeR || h.r.Status().LastError != nil || h.r.Status().Stale {
		t.Fatal("a cancelled refresh was recorded as a failure")
	}
}

func TestNextDelay(t *testing.T) {
	r := &Refresher{period: period, random: func() float64 { return 0.5 }}
	want := []time.Duration{period, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for failures, w := range want {
		if got := r.nextDelay(failures); got != w {
			t.Errorf("%d failures: %v, want %v", failures, got, w)
		}
	}
	if got := r.nextDelay(math.MaxInt); got != RetryMax {
		t.Errorf("many failures: %v, want %v", got, RetryMax)
	}
	// Retries never wait longer than a normal period.
	short := &Refresher{period: 45 * time.Second, random: func() float64 { return 0.5 }}
	for failures, w := range []time.Duration{45 * time.Second, 30 * time.Second, 45 * time.Second, 45 * time.Second} {
		if got := short.nextDelay(failures); got != w {
			t.Errorf("45s period, %d failures: %v, want %v", failures, got, w)
		}
	}
}

func TestJitterBounds(t *testing.T) {
	lo, hi := time.Duration(float64(period)*(1-Jitter)), time.Duration(float64(period)*(1+Jitter))
	if got := jitter(period, 0); got != lo {
		t.Fatalf("lowest draw %v, want %v", got, lo)
	}
	if got := jitter(period, math.Nextafter(1, 0)); got > hi || got < hi-time.Millisecond {
		t.Fatalf("highest draw %v, want at most %v", got, hi)
	}
	for _, bad := range []float64{-1, 1, 2, math.NaN()} {
		if got := jitter(period, bad); got != period {
			t.Fatalf("out-of-range draw %v gave %v, want the period", bad, got)
		}
	}
	// The default source, as wired by New, stays in the band and does spread.
	r, err := New(settings.Defaults(), loadBase(t).Rates, nil, nil, func(context.Context, Update) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := r.nextDelay(0)
		if d < lo || d > hi {
			t.Fatalf("jittered delay %v outside [%v, %v]", d, lo, hi)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct delays in 1000 draws: no jitter", len(seen))
	}
}

func TestNew(t *testing.T) {
	sink := func(context.Context, Update) error { return nil }
	base := loadBase(t).Rates
	r, err := New(settings.Defaults(), base, nil, nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	if !r.NeedLeaderElection() {
		t.Fatal("the refresher must run on the leader only")
	}
	if r.productURL != "https://api.clever-cloud.com/v4/kubernetes-product" ||
		r.priceURL != "https://api.clever-cloud.com/v4/billing/price-system?zone_id=par" {
		t.Fatalf("default endpoints %q %q", r.productURL, r.priceURL)
	}

	s := settings.Defaults()
	s.Pricing.PriceSystemURL = "https://prices.example/ps?format=json"
	s.Region = "rbx"
	r, err = New(s, base, nil, nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(r.priceURL)
	if u.Host != "prices.example" || u.Query().Get("format") != "json" || u.Query().Get("zone_id") != "rbx" {
		t.Fatalf("overridden price-system URL %q", r.priceURL)
	}

	bad := settings.Defaults()
	bad.Pricing.RefreshPeriod.Duration = 0
	bad.Pricing.KubernetesProductURL = "ftp://nope"
	bad.Region = ""
	_, err = New(bad, base, nil, nil, sink)
	for _, want := range []string{"refresh period", "kubernetes-product URL", "region"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
	if _, err := New(settings.Defaults(), base, nil, nil, nil); err == nil {
		t.Error("nil sink accepted")
	}
	if _, err := New(settings.Defaults(), catalog.Rates{Currency: base.Currency}, nil, nil, sink); err == nil {
		t.Error("zero reference rates accepted")
	}
	if _, err := New(settings.Defaults(), catalog.Rates{VCPUHourly: base.VCPUHourly, RAMGBHourly: base.RAMGBHourly}, nil, nil, sink); err == nil {
		t.Error("reference rates without a currency accepted")
	}
}

func TestStartAppliesJitter(t *testing.T) {
	for _, tt := range []struct {
		draw float64
		want time.Duration
	}{{0, 9 * period / 10}, {0.75, 21 * period / 20}} {
		draw := tt.draw
		h := newHarness(t, nil, WithJitterSource(func() float64 { return draw }))
		h.start()
		h.update()
		h.expectScheduled(tt.want)
		// Failures are jittered too, so that clusters failing together do not retry together.
		h.api.SetFault(priceapi.ServerError)
		h.clock.Step(tt.want)
		h.expectScheduled(time.Duration(float64(RetryInitial) * (1 - Jitter + 2*Jitter*draw)))
	}
}
