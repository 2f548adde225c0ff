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
	// StaleAfterPeriods is how many refresh periods without success make prices stale.
	StaleAfterPeriods = 2
)

// Update is what one successful refresh hands to the catalogue.
type Update struct {
	// Rates are the live per-resource rates, validated.
	Rates catalog.Rates
	// Available are the flavors offered, sorted; nil means no restriction.
	Available []string
}

// Sink applies an Update; the catalogue provides it. An error means the update was not
// applied, and counts as a failed refresh.
type Sink func(context.Context, Update) error

// Option tunes a Refresher, mostly for tests.
type Option func(*Refresher)

// WithReferenceRates centres the sanity band on rates other than ReferenceRates, e.g. the
// loaded base catalogue's.
func WithReferenceRates(r catalog.Rates) Option { return func(x *Refresher) { x.reference = r } }

// WithRequestTimeout bounds each HTTP request (DefaultRequestTimeout otherwise).
func WithRequestTimeout(d time.Duration) Option { return func(x *Refresher) { x.timeout = d } }

// WithJitterSource replaces the random source of the jitter; fn returns a value in [0, 1).
func WithJitterSource(fn func() float64) Option { return func(x *Refresher) { x.random = fn } }

// Refresher periodically reads the two public documents and hands validated rates and the
// available-flavor list to its Sink. It never blocks start-up or provisioning: until the
// first success the catalogue simply keeps its embedded prices, and after a failure it keeps
// the last good ones.
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
}

var (
	_ manager.Runnable               = (*Refresher)(nil)
	_ manager.LeaderElectionRunnable = (*Refresher)(nil)
)

// New builds a Refresher from the settings it needs: the endpoints and period of s.Pricing,
// s.Region (the price-system zone_id) and s.Topology. It does not look at
// s.Pricing.Enabled: the caller decides whether to add it to the manager. A nil client gets
// a default one (every request is bounded by the request timeout anyway); a nil clock is the
// real clock.
func New(s settings.Settings, client *http.Client, clk clock.Clock, sink Sink, opts ...Option) (*Refresher, error) {
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
		reference:  ReferenceRates,
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
	if r.reference.VCPUHourly <= 0 || r.reference.RAMGBHourly <= 0 {
		errs = append(errs, fmt.Errorf("reference rates %+v: must be positive", r.reference))
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
	ratesInUse.WithLabelValues(ResourceVCPU).Set(r.reference.VCPUHourly)
	ratesInUse.WithLabelValues(ResourceRAMGB).Set(r.reference.RAMGBHourly)
	logger.Info("starting price refresher", "productURL", r.productURL, "priceSystemURL", r.priceURL,
		"topology", r.topology, "period", r.period)
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
	update, err := r.fetchUpdate(ctx)
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
	if err != nil {
		r.failures++
		r.lastErr = err
	} else {
		r.failures = 0
		r.lastErr = nil
		r.lastSuccess = now
		// A copy, so that a sink keeping and editing the list cannot fake "no change".
		r.lastUpdate = &Update{Rates: update.Rates, Available: slices.Clone(update.Available)}
	}
	failures := r.failures
	r.mu.Unlock()

	delay := r.nextDelay(failures)
	consecutiveFailures.Set(float64(failures))
	if err != nil {
		re := classify("", err)
		refreshFailures.WithLabelValues(re.endpoint, re.reason).Inc()
		logger.Error(err, "price refresh failed; keeping the last known good prices",
			"endpoint", re.endpoint, "reason", re.reason, "consecutiveFailures", failures, "retryIn", delay)
		return delay, err
	}
	logChanges(logger, previous, update)
	lastSuccess.Set(float64(now.Unix()))
	ratesInUse.WithLabelValues(ResourceVCPU).Set(update.Rates.VCPUHourly)
	ratesInUse.WithLabelValues(ResourceRAMGB).Set(update.Rates.RAMGBHourly)
	logger.V(1).Info("prices refreshed", "vcpuHourly", update.Rates.VCPUHourly, "ramGBHourly", update.Rates.RAMGBHourly,
		"currency", update.Rates.Currency, "available", update.Available, "nextIn", delay)
	return delay, nil
}

func (r *Refresher) fetchUpdate(ctx context.Context) (Update, error) {
	body, err := fetch(ctx, r.client, r.productURL, r.timeout, MaxBodyBytes)
	if err != nil {
		return Update{}, withEndpoint(EndpointProduct, err)
	}
	available, err := DecodeProduct(body, r.topology)
	if err != nil {
		return Update{}, withEndpoint(EndpointProduct, err)
	}
	body, err = fetch(ctx, r.client, r.priceURL, r.timeout, MaxBodyBytes)
	if err != nil {
		return Update{}, withEndpoint(EndpointPriceSystem, err)
	}
	rates, err := DecodePriceSystem(body, r.zone, r.reference)
	if err != nil {
		return Update{}, withEndpoint(EndpointPriceSystem, err)
	}
	return Update{Rates: rates, Available: available}, nil
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

// LastSuccess is when prices were last accepted and applied; zero if never.
func (r *Refresher) LastSuccess() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastSuccess
}

// LastError is the error of the last refresh, nil if it succeeded or none ran yet.
func (r *Refresher) LastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// Stale reports whether the prices in use can no longer be trusted to be current: no
// success for more than StaleAfterPeriods periods, or the first attempts all failed (the
// catalogue is then still on its embedded prices). Before the first attempt it is false:
// the embedded prices are expected then.
func (r *Refresher) Stale() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastSuccess.IsZero() {
		return !r.lastAttempt.IsZero()
	}
	return r.clock.Since(r.lastSuccess) > StaleAfterPeriods*r.period
}
