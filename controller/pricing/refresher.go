package pricing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/pricing/pricedoc"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
)

// Schedule constants. Failures retry on an exponential backoff so that a short outage heals
// within minutes rather than a whole period, without hammering an API that is down.
const (
	// Jitter spreads refreshes by ±10% so that many clusters started together (or one
	// controller restarted in a loop) do not call the API in lockstep.
	Jitter = 0.1
	// RetryInitial is the first retry delay after a failure; it doubles on each further failure.
	RetryInitial = 30 * time.Second
	// RetryMax caps the retry delay, which also never exceeds the refresh period.
	RetryMax = 10 * time.Minute
	// StaleAfterPeriods is how many refresh periods without success make prices stale: they
	// are stale once the last success is more than StaleAfterPeriods × period old (Status.Stale).
	// Two periods leave room for one failed refresh and its retries before anyone is told.
	StaleAfterPeriods = 2
)

// Update is what one successful refresh hands to the catalogue.
type Update struct {
	// Rates are the live per-resource rates, validated.
	Rates catalog.Rates
	// Available are the flavors offered, sorted; nil means no restriction: every flavor of
	// the catalogue is offered, which is what happens whenever the product listing cannot be
	// read (today, because it answers 401 without a token).
	Available []string
}

// ListingStatus says where the flavor availability of the last applied refresh came from.
type ListingStatus struct {
	// Readable is true when /v4/kubernetes-product was read and accepted, and its flavors
	// (of the configured topology, if any) are the ones offered. When false, availability is
	// the catalogue's: no flavor is withdrawn because the listing could not be read.
	Readable bool
	// StatusCode is the HTTP status the listing answered instead of 200 (401 on today's
	// platform); 0 when it was readable or failed otherwise (timeout, malformed, …).
	StatusCode int
	// Problem says why the listing was not used, e.g. "HTTP status 401 Unauthorized"; empty
	// when Readable.
	Problem string
}

// Status is a consistent snapshot of the refresher's state, for the PricesCurrent condition.
type Status struct {
	// LastAttempt and LastSuccess are when a refresh last ended, and last ended with prices
	// applied; zero if never.
	LastAttempt, LastSuccess time.Time
	// LastError is the error of the last refresh, nil if it succeeded or none ran yet.
	LastError error
	// Stale says whether the prices in use can no longer be trusted to be current: no success
	// for more than StaleAfterPeriods periods, or the first attempts all failed (the catalogue
	// is then still on its embedded prices). Before the first attempt it is false: the
	// embedded prices are expected then. A product listing that cannot be read never makes
	// prices stale: it only decides where availability comes from.
	Stale bool
	// StaleIn is how long, on the refresher's clock, until the prices turn stale unless a
	// refresh succeeds first: a nanosecond past the deadline, since Stale is strict. 0 when
	// they are stale already or never succeeded.
	StaleIn time.Duration
	// Listing describes the product listing as of the last success; zero before it.
	Listing ListingStatus
	// Topology is the configured topology (settings.topology), "" for all. It only applies
	// while the listing is readable.
	Topology string
}

// Sink applies an Update; the catalogue provides it. An error means the update was not
// applied, and counts as a failed refresh.
type Sink func(context.Context, Update) error

// Option tunes a Refresher; the tests' options are in export_test.go.
type Option func(*Refresher)

// Refresher periodically reads the two public documents and hands validated rates and the
// available-flavor list to its Sink. It never blocks start-up or provisioning: until the
// first success the catalogue simply keeps its embedded prices, and after a failure it keeps
// the last good ones.
//
// Only the price system is required. The product listing is optional: since 2026-09 it
// answers 401 without a token, and a refresher that needed it would never refresh a price on
// today's platform. When it cannot be read (401 or any other failure), the refresh still
// applies the rates and offers every catalogue flavor; the topology filter, which needs the
// listing, is then ignored.
//
// Subscribers (Subscribe) are told whenever the state Status reports may have changed: after
// every recorded attempt, and when the last success passes its staleness deadline.
type Refresher struct {
	productURL  string
	priceURL    string
	zone        string
	topology    string
	period      time.Duration
	client      *http.Client
	clock       clock.Clock
	sink        Sink
	reference   catalog.Rates
	timeout     time.Duration
	random      func() float64
	refreshOnce sync.Mutex // one refresh at a time

	mu          sync.Mutex
	lastAttempt time.Time
	lastSuccess time.Time
	lastErr     error
	failures    int
	lastUpdate  *Update
	listing     ListingStatus
	// listingKey identifies the listing's state last logged, so that a listing answering 401
	// every period is logged once, when it starts, not once per refresh.
	listingKey string
	staleTimer clock.Timer // fires just past the staleness deadline of the last success

	// subMu guards subscribers alone and is never held while calling the clock: a fake
	// clock runs AfterFunc callbacks (notify) under its own lock, while mu is held around
	// clock calls, so sharing mu would deadlock.
	subMu       sync.Mutex
	subscribers []chan struct{}
}

var (
	_ manager.Runnable               = (*Refresher)(nil)
	_ manager.LeaderElectionRunnable = (*Refresher)(nil)
)

// New builds a Refresher from the settings it needs: the endpoints and period of s.Pricing,
// s.Region (the price-system zone_id) and s.Topology. It does not look at
// s.Pricing.Enabled: the caller decides whether to add it to the manager. reference are the
// loaded base catalogue's rates: live rates must stay within pricedoc.RateBandFactor of them, in their
// currency. A nil client gets a default one (every request is bounded by the request timeout
// anyway); a nil clock is the real clock.
func New(s settings.Settings, reference catalog.Rates, client *http.Client, clk clock.Clock, sink Sink, opts ...Option) (*Refresher, error) {
	if sink == nil {
		return nil, errors.New("pricing refresher: nil sink")
	}
	if client == nil {
		client = &http.Client{}
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	r := &Refresher{
		productURL: s.Pricing.ProductURL(),
		zone:       s.Region,
		topology:   s.Topology,
		period:     s.Pricing.RefreshPeriod.Duration,
		client:     client,
		clock:      clk,
		sink:       sink,
		reference:  reference,
		timeout:    DefaultRequestTimeout,
		random:     rand.Float64,
	}
	for _, o := range opts {
		o(r)
	}
	var errs []error
	if r.period <= 0 {
		errs = append(errs, fmt.Errorf("refresh period %v: must be positive", r.period))
	}
	if r.timeout <= 0 {
		errs = append(errs, fmt.Errorf("request timeout %v: must be positive", r.timeout))
	}
	if r.zone == "" {
		errs = append(errs, errors.New("region (the price-system zone_id) is empty"))
	}
	if err := pricedoc.CheckReference(toDoc(r.reference)); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, checkURL("kubernetes-product URL", r.productURL))
	if err := checkURL("price-system URL", s.Pricing.PriceSystemEndpoint()); err != nil {
		errs = append(errs, err)
	} else if r.priceURL, err = priceSystemURL(s.Pricing.PriceSystemEndpoint(), r.zone); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("pricing refresher: %w", err)
	}
	return r, nil
}

// NeedLeaderElection makes the manager run the refresher on the leader only: followers keep
// their embedded catalogue and do not call the API.
func (r *Refresher) NeedLeaderElection() bool { return true }

// Start refreshes at once, then every period (jittered), sooner after a failure, until ctx
// is done. It returns nil on shutdown: a refresher that cannot reach the API is degraded,
// not fatal, so it never takes the manager down.
func (r *Refresher) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("pricing")
	ReportRates(r.reference)
	logger.Info("starting price refresher", "productURL", r.productURL, "priceSystemURL", r.priceURL,
		"topology", r.topology, "period", r.period)
	defer r.stopStaleTimer()
	for {
		delay, _ := r.refresh(ctx)
		if ctx.Err() != nil {
			return nil
		}
		timer := r.clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C():
		}
	}
}

// Refresh runs one refresh now and returns its error; the schedule of a running Start is
// not changed.
func (r *Refresher) Refresh(ctx context.Context) error {
	_, err := r.refresh(ctx)
	return err
}

// refresh fetches and validates both documents, hands them to the sink, records the outcome
// and returns the delay until the next attempt.
func (r *Refresher) refresh(ctx context.Context) (time.Duration, error) {
	r.refreshOnce.Lock()
	defer r.refreshOnce.Unlock()
	logger := log.FromContext(ctx).WithName("pricing")

	refreshAttempts.Inc()
	update, listing, err := r.fetchUpdate(ctx)
	if err == nil {
		if sinkErr := r.sink(ctx, update); sinkErr != nil {
			err = &refreshError{endpoint: EndpointCatalog, reason: ReasonSink, err: fmt.Errorf("applying the update: %w", sinkErr)}
		}
	}
	if err != nil && ctx.Err() != nil {
		// Shutting down or losing the lease is not the API's fault: record nothing.
		return 0, err
	}

	now := r.clock.Now()
	r.mu.Lock()
	r.lastAttempt = now
	previous := r.lastUpdate
	listingChanged := false
	if err != nil {
		r.failures++
		r.lastErr = err
	} else {
		r.failures = 0
		r.lastErr = nil
		r.lastSuccess = now
		// A copy, so that a sink keeping and editing the list cannot fake "no change".
		r.lastUpdate = &Update{Rates: update.Rates, Available: slices.Clone(update.Available)}
		r.listing = listing
		if key := listingKey(listing); key != r.listingKey {
			r.listingKey, listingChanged = key, true
		}
		r.armStaleTimerLocked()
	}
	failures := r.failures
	r.mu.Unlock()
	// After the state is recorded, so that a subscriber reading Status sees this attempt.
	defer r.notify()

	delay := r.nextDelay(failures)
	consecutiveFailures.Set(float64(failures))
	if err != nil {
		re := classify("", err)
		refreshFailures.WithLabelValues(re.endpoint, re.reason).Inc()
		logger.Error(err, "price refresh failed; keeping the last known good prices",
			"endpoint", re.endpoint, "reason", re.reason, "consecutiveFailures", failures, "retryIn", delay)
		return delay, err
	}
	productListingAvailable.Set(boolGauge(listing.Readable))
	if listingChanged {
		r.logListing(logger, listing)
	}
	logChanges(logger, previous, update)
	lastSuccess.Set(float64(now.Unix()))
	ReportRates(update.Rates)
	logger.V(1).Info("prices refreshed", "vcpuHourly", update.Rates.VCPUHourly, "ramGBHourly", update.Rates.RAMGBHourly,
		"currency", update.Rates.Currency, "available", update.Available, "nextIn", delay)
	return delay, nil
}

// fetchUpdate reads the product listing, then the price system. Only the price system can
// fail the refresh: a listing that cannot be read leaves Available nil (every catalogue
// flavor) and says why in the ListingStatus.
func (r *Refresher) fetchUpdate(ctx context.Context) (Update, ListingStatus, error) {
	available, listing := r.fetchListing(ctx)
	body, err := fetch(ctx, r.client, r.priceURL, r.timeout, MaxBodyBytes)
	if err != nil {
		return Update{}, listing, withEndpoint(EndpointPriceSystem, err)
	}
	rates, err := DecodePriceSystem(body, r.zone, r.reference)
	if err != nil {
		return Update{}, listing, withEndpoint(EndpointPriceSystem, err)
	}
	return Update{Rates: rates, Available: available}, listing, nil
}

// fetchListing reads the available flavors from the product listing. Any failure, the 401
// of today's platform first of all, falls back to the catalogue (nil) rather than keeping
// an earlier listing: a listing that is no longer public would otherwise freeze the offer
// forever, and a transient failure only offers the catalogue until the next refresh.
func (r *Refresher) fetchListing(ctx context.Context) ([]string, ListingStatus) {
	body, err := fetch(ctx, r.client, r.productURL, r.timeout, MaxBodyBytes)
	if err == nil {
		var available []string
		if available, err = DecodeProduct(body, r.topology); err == nil {
			return available, ListingStatus{Readable: true}
		}
	}
	re := classify(EndpointProduct, err)
	problem := re.err.Error()
	if re.status != 0 {
		problem = fmt.Sprintf("HTTP status %d %s", re.status, http.StatusText(re.status))
	}
	return nil, ListingStatus{StatusCode: re.status, Problem: problem}
}

// listingKey is what must change for the listing's state to be logged again: readability
// and the status code or failure reason, not the error text (which may carry varying detail).
func listingKey(l ListingStatus) string {
	if l.Readable {
		return "readable"
	}
	if l.StatusCode != 0 {
		return fmt.Sprintf("status %d", l.StatusCode)
	}
	return "unreadable"
}

// logListing logs a change of the listing's state, at info level: a 401 is the platform's
// normal answer since 2026-09, not an error to page anyone about, and the refresh succeeded.
func (r *Refresher) logListing(logger logr.Logger, l ListingStatus) {
	if l.Readable {
		logger.Info("product listing readable; offering the flavors it lists", "productURL", r.productURL, "topology", r.topology)
		return
	}
	kv := []any{"productURL", r.productURL, "problem", l.Problem}
	if r.topology != "" {
		kv = append(kv, "ignoredTopology", r.topology)
	}
	logger.Info("product listing unreadable; flavor availability comes from the catalogue until it is readable again", kv...)
}

// Subscribe returns a channel that receives a value whenever Status may have changed. It is
// buffered by one and never blocks the refresher: signals coalesce, so a subscriber must
// read Status afresh on each one rather than count them.
func (r *Refresher) Subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)
	r.subMu.Lock()
	defer r.subMu.Unlock()
	r.subscribers = append(r.subscribers, ch)
	return ch
}

func (r *Refresher) notify() {
	r.subMu.Lock()
	defer r.subMu.Unlock()
	for _, ch := range r.subscribers {
		select {
		case ch <- struct{}{}:
		default: // a signal is already pending
		}
	}
}

// armStaleTimerLocked (re)arms the notification of the staleness deadline of the success
// just recorded: Stale turns true strictly after StaleAfterPeriods periods, hence the extra
// nanosecond. r.mu must be held.
func (r *Refresher) armStaleTimerLocked() {
	if r.staleTimer != nil {
		r.staleTimer.Stop()
	}
	d := StaleAfterPeriods*r.period + time.Nanosecond
	if c, ok := r.clock.(clock.WithDelayedExecution); ok {
		r.staleTimer = c.AfterFunc(d, r.notify)
		return
	}
	// A clock without AfterFunc: a timer and a goroutine that ends when it fires or stops.
	t := r.clock.NewTimer(d)
	stopped := make(chan struct{})
	r.staleTimer = &stoppableTimer{Timer: t, stopped: stopped}
	go func() {
		select {
		case <-t.C():
			r.notify()
		case <-stopped:
		}
	}()
}

func (r *Refresher) stopStaleTimer() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.staleTimer != nil {
		r.staleTimer.Stop()
		r.staleTimer = nil
	}
}

// stoppableTimer also ends the goroutine waiting on the timer when stopped.
type stoppableTimer struct {
	clock.Timer
	stopped chan struct{}
	once    sync.Once
}

func (t *stoppableTimer) Stop() bool {
	t.once.Do(func() { close(t.stopped) })
	return t.Timer.Stop()
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func withEndpoint(endpoint string, err error) error {
	re := classify(endpoint, err)
	re.endpoint = endpoint
	return re
}

// logChanges logs at info level only what changed, so that a 12-hourly refresh that changes
// nothing stays quiet while a repricing is always in the log.
func logChanges(logger logr.Logger, previous *Update, current Update) {
	if previous == nil {
		logger.Info("live prices applied", "vcpuHourly", current.Rates.VCPUHourly, "ramGBHourly", current.Rates.RAMGBHourly,
			"currency", current.Rates.Currency, "available", current.Available)
		return
	}
	if previous.Rates != current.Rates {
		logger.Info("rates changed", "vcpuHourly", current.Rates.VCPUHourly, "previousVCPUHourly", previous.Rates.VCPUHourly,
			"ramGBHourly", current.Rates.RAMGBHourly, "previousRAMGBHourly", previous.Rates.RAMGBHourly)
	}
	if !slices.Equal(previous.Available, current.Available) {
		logger.Info("available flavors changed", "available", current.Available, "previous", previous.Available)
	}
}

// nextDelay is the period after a success and min(period, backoff) after failures, both
// jittered.
func (r *Refresher) nextDelay(failures int) time.Duration {
	d := r.period
	if failures > 0 {
		backoff := RetryMax
		// Beyond 2^5 × 30s the cap applies; stopping the shift there also rules out overflow.
		if failures <= 5 {
			backoff = min(RetryInitial<<(failures-1), RetryMax)
		}
		d = min(d, backoff)
	}
	return jitter(d, r.random())
}

// jitter spreads d uniformly over [d×(1−Jitter), d×(1+Jitter)] for u in [0, 1); the upper
// edge is reachable through float rounding only.
func jitter(d time.Duration, u float64) time.Duration {
	if u < 0 || u >= 1 || math.IsNaN(u) {
		u = 0.5
	}
	return time.Duration(float64(d) * (1 - Jitter + 2*Jitter*u))
}

// staleLocked returns Status.Stale and, when not stale after a success, the time left until it is.
func (r *Refresher) staleLocked() (bool, time.Duration) {
	if r.lastSuccess.IsZero() {
		return !r.lastAttempt.IsZero(), 0
	}
	left := StaleAfterPeriods*r.period - r.clock.Since(r.lastSuccess)
	if left < 0 {
		return true, 0
	}
	// At exactly the deadline prices are not stale yet: the caller must look again just past it.
	return false, left + time.Nanosecond
}

// Status returns a snapshot of the refresher's state.
func (r *Refresher) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	stale, left := r.staleLocked()
	return Status{
		LastAttempt: r.lastAttempt,
		LastSuccess: r.lastSuccess,
		LastError:   r.lastErr,
		Stale:       stale,
		StaleIn:     left,
		Listing:     r.listing,
		Topology:    r.topology,
	}
}
