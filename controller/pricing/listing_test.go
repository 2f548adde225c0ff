package pricing

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/priceapi"
)

// productFailures sums the failures counted against the product endpoint, whatever the
// reason: an unreadable listing must not count as a failed refresh.
func productFailures(t *testing.T) float64 {
	t.Helper()
	total := 0.0
	for _, reason := range []string{ReasonRequest, ReasonTimeout, ReasonStatus, ReasonTooLarge, ReasonMalformed, ReasonInvalid} {
		total += value(t, refreshFailures.WithLabelValues(EndpointProduct, reason))
	}
	return total
}

// Whatever stops the listing from being read, the 401 of today's API first, prices still
// refresh from the price system and every catalogue flavor stays offered, even with a
// topology configured.
func TestListingFailuresFallBackToTheCatalog(t *testing.T) {
	tests := []struct {
		name      string
		break_    func(*priceapi.Server)
		status    int
		inProblem string
	}{
		{name: "401 of today's API", break_: func(*priceapi.Server) {}, status: 401, inProblem: "HTTP status 401 Unauthorized"},
		{name: "legacy listing 500", break_: func(s *priceapi.Server) {
			s.SetLegacyProduct(true)
			s.SetEndpointFault(priceapi.Product, priceapi.ServerError)
		}, status: 500, inProblem: "HTTP status 500"},
		{name: "legacy listing malformed", break_: func(s *priceapi.Server) {
			s.SetLegacyProduct(true)
			s.SetEndpointFault(priceapi.Product, priceapi.Malformed)
		}, inProblem: "malformed JSON"},
		{name: "legacy listing stalled", break_: func(s *priceapi.Server) {
			s.SetLegacyProduct(true)
			s.SetEndpointFault(priceapi.Product, priceapi.Stall)
		}, inProblem: "deadline exceeded"},
		{name: "legacy listing without the topology", break_: func(s *priceapi.Server) {
			s.SetLegacyProduct(true)
			s.SetAvailableFlavors("ALL_IN_ONE", nil)
		}, inProblem: `no topology "ALL_IN_ONE"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(s *settings.Settings) { s.Topology = "ALL_IN_ONE" }, WithRequestTimeout(time.Second))
			// A listing read before must not linger once it cannot be read.
			h.api.SetLegacyProduct(true)
			if err := h.r.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			if u := h.update(); !slices.Equal(u.Available, []string{"L", "M", "S", "XL"}) {
				t.Fatalf("ALL_IN_ONE available %v", u.Available)
			}
			if got := value(t, productListingAvailable); got != 1 {
				t.Fatalf("product_listing_available %v with the listing read, want 1", got)
			}
			h.api.SetLegacyProduct(false)
			tt.break_(h.api)
			h.api.SetRates(0.003, 0.006)
			before := productFailures(t)

			if err := h.r.Refresh(context.Background()); err != nil {
				t.Fatalf("refresh failed although the price system answered: %v", err)
			}
			u := h.update()
			if u.Available != nil || u.Rates.VCPUHourly != 0.003 || u.Rates.RAMGBHourly != 0.006 {
				t.Fatalf("update %+v, want the new rates and no availability restriction", u)
			}
			st := h.r.Status()
			if st.Listing.Readable || st.Listing.StatusCode != tt.status || !strings.Contains(st.Listing.Problem, tt.inProblem) {
				t.Fatalf("listing status %+v, want status %d and a problem saying %q", st.Listing, tt.status, tt.inProblem)
			}
			if st.Stale || st.LastError != nil || st.Topology != "ALL_IN_ONE" {
				t.Fatalf("status %+v: an unreadable listing made the refresh fail", st)
			}
			if got := value(t, productListingAvailable); got != 0 {
				t.Fatalf("product_listing_available %v, want 0", got)
			}
			if got := productFailures(t) - before; got != 0 {
				t.Fatalf("%v product failures counted, want none", got)
			}
			if got := value(t, consecutiveFailures); got != 0 {
				t.Fatalf("consecutive failures %v, want 0", got)
			}
		})
	}
}

// logRecorder keeps every line a logger writes, telling errors apart.
type logRecorder struct {
	mu     sync.Mutex
	lines  []string
	errors []string
}

func (l *logRecorder) context() context.Context {
	logger := funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if strings.Contains(args, `"error"=`) {
			l.errors = append(l.errors, args)
		}
		l.lines = append(l.lines, args)
	}, funcr.Options{Verbosity: 1})
	return log.IntoContext(context.Background(), logger)
}

// count is how many lines contain s.
func (l *logRecorder) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// The listing's state is logged once per change, at info level, not once per refresh; the
// topology it cannot apply is named; and the listing coming back is picked up at the next
// refresh, topology and all.
func TestListingStateLoggedOncePerChange(t *testing.T) {
	h := newHarness(t, func(s *settings.Settings) { s.Topology = "ALL_IN_ONE" })
	logs := &logRecorder{}
	ctx := logs.context()
	const unreadable, readable = "product listing unreadable", "product listing readable"

	for range 3 {
		if err := h.r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if u := h.update(); u.Available != nil {
			t.Fatalf("available %v on a 401, want nil", u.Available)
		}
		h.clock.Step(period)
	}
	if n := logs.count(unreadable); n != 1 {
		t.Fatalf("%d lines say the listing is unreadable after three refreshes on a 401, want 1:\n%s", n, strings.Join(logs.lines, "\n"))
	}
	if logs.count(`"ignoredTopology"="ALL_IN_ONE"`) != 1 || logs.count(`HTTP status 401`) != 1 {
		t.Fatalf("the line does not name the ignored topology and the 401:\n%s", strings.Join(logs.lines, "\n"))
	}

	// The listing comes back: its topology applies again, and that is logged once.
	h.api.SetLegacyProduct(true)
	for range 2 {
		if err := h.r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if u := h.update(); !slices.Equal(u.Available, []string{"L", "M", "S", "XL"}) {
			t.Fatalf("available %v once the listing is back, want ALL_IN_ONE's", u.Available)
		}
	}
	if st := h.r.Status(); !st.Listing.Readable || st.Listing.Problem != "" || value(t, productListingAvailable) != 1 {
		t.Fatalf("listing %+v, gauge %v after recovery", st.Listing, value(t, productListingAvailable))
	}
	if n := logs.count(readable); n != 1 {
		t.Fatalf("%d lines say the listing is readable, want 1", n)
	}

	// And a new 401 is a new state change, logged again.
	h.api.SetLegacyProduct(false)
	if err := h.r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	h.update()
	if n := logs.count(unreadable); n != 2 {
		t.Fatalf("%d unreadable lines after the listing went again, want 2", n)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if len(logs.errors) > 0 {
		t.Fatalf("error lines for a refresh that succeeded:\n%s", strings.Join(logs.errors, "\n"))
	}
}

// signalled waits for a signal on ch.
func signalled(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no signal after %s", what)
	}
}

// silent checks that no signal is pending on ch. The fake clock runs the staleness
// callback synchronously within Step, so a missing signal here is not a race.
func silent(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("unexpected signal after %s", what)
	default:
	}
}

// Subscribers hear of every attempt and of the staleness deadline, exactly when it passes.
func TestSubscribersHearOfRefreshesAndStaleness(t *testing.T) {
	h := newHarness(t, nil)
	first, second := h.r.Subscribe(), h.r.Subscribe()
	ctx := context.Background()

	if err := h.r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	h.update()
	signalled(t, first, "a success")
	signalled(t, second, "a success (second subscriber)")
	if st := h.r.Status(); st.Stale || st.StaleIn != StaleAfterPeriods*period+time.Nanosecond || !st.LastSuccess.Equal(h.clock.Now()) {
		t.Fatalf("status after success %+v", st)
	}

	// A second success moves the deadline: the first one's timer must not fire.
	h.clock.Step(period)
	if err := h.r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	h.update()
	signalled(t, first, "the second success")
	h.clock.Step(period + time.Nanosecond) // past the first success's deadline
	silent(t, first, "the first deadline, superseded")
	if h.r.Status().Stale {
		t.Fatal("stale one period after the last success")
	}

	// Failures are signalled too, and do not move the deadline.
	h.api.SetFault(priceapi.ServerError)
	if err := h.r.Refresh(ctx); err == nil {
		t.Fatal("refresh against a failing API succeeded")
	}
	signalled(t, first, "a failure")
	if st := h.r.Status(); st.Stale || st.StaleIn != period || st.LastError == nil {
		t.Fatalf("status after a failure %+v, want %v left", st, period)
	}
	// Drain the second subscriber's coalesced signals so that its next one is the deadline's.
	select {
	case <-second:
	default:
	}
	h.clock.Step(period - time.Nanosecond) // exactly at the deadline: not stale yet
	silent(t, first, "the deadline itself")
	silent(t, second, "the deadline itself (second subscriber)")
	if st := h.r.Status(); st.Stale || st.StaleIn != time.Nanosecond {
		t.Fatalf("status at the deadline %+v", st)
	}
	h.clock.Step(time.Nanosecond)
	signalled(t, first, "the staleness deadline")
	signalled(t, second, "the staleness deadline (second subscriber)")
	if st := h.r.Status(); !st.Stale || st.StaleIn != 0 {
		t.Fatalf("status past the deadline %+v", st)
	}
}
