package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// The controller's metrics the launch figures come from.
const (
	// Karpenter core times every CloudProvider call (its metrics decorator), by method.
	createDurationMetric = "karpenter_cloudprovider_duration_seconds"
	createErrorsMetric   = "karpenter_cloudprovider_errors_total"
	// The provider counts launches by outcome; TimedOut is a Create that got no decision from
	// the node-group operator within its acceptance timeout.
	launchesMetric = "karpenter_clevercloud_nodegroup_launches_total"
	// Karpenter core's cluster state: 1 synced, 0 not (some NodeClaim has no provider ID);
	// provisioning and disruption wait while it is 0.
	syncedMetric = "karpenter_cluster_state_synced"
)

// hist is a histogram's count and sum. Karpenter core's Create histogram has Prometheus'
// default buckets (…, 0.5, 1, 2.5, 5, …): too coarse for quantiles around the 1–2 s a Create
// takes, so the bench takes only its exact mean, and the quantiles from its own watch.
type hist struct {
	count, sum float64
}

func (h *hist) add(o hist) {
	h.count += o.count
	h.sum += o.sum
}

// sub is h − o, or h alone when a counter went back (the process restarted in between).
func (h hist) sub(o hist) hist {
	if h.count < o.count {
		return h
	}
	return hist{count: h.count - o.count, sum: h.sum - o.sum}
}

// histOf sums the histogram samples of family name whose labels include labels.
func histOf(fams map[string]*dto.MetricFamily, name string, labels map[string]string) hist {
	var h hist
	f, ok := fams[name]
	if !ok {
		return h
	}
	for _, m := range f.GetMetric() {
		if m.Histogram == nil || !hasLabels(m, labels) {
			continue
		}
		h.count += float64(m.Histogram.GetSampleCount())
		h.sum += m.Histogram.GetSampleSum()
	}
	return h
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, lp := range m.GetLabel() {
			found = found || (lp.GetName() == k && lp.GetValue() == v)
		}
		if !found {
			return false
		}
	}
	return true
}

// launchMetrics is one scrape of the controller's launch figures.
type launchMetrics struct {
	create   hist
	errors   float64
	timeouts float64
}

func scrapeLaunchMetrics(c *stack.Controller) (*launchMetrics, error) {
	if c == nil || !c.Running() {
		return nil, fmt.Errorf("the controller is not running")
	}
	fams, err := c.Metrics()
	if err != nil {
		return nil, fmt.Errorf("scraping the controller's metrics: %w", err)
	}
	create := map[string]string{"method": "Create"}
	return &launchMetrics{
		create:   histOf(fams, createDurationMetric, create),
		errors:   stack.Sum(fams, createErrorsMetric, create),
		timeouts: stack.Sum(fams, launchesMetric, map[string]string{"outcome": "TimedOut"}),
	}, nil
}

func (l *launchMetrics) sub(o *launchMetrics) launchMetrics {
	return launchMetrics{create: l.create.sub(o.create), errors: delta(o.errors, l.errors), timeouts: delta(o.timeouts, l.timeouts)}
}

// CreateStat is the provider's Create over a window, from Karpenter core's histogram: how
// many, their exact mean, how many failed, and the acceptance timeouts among them.
type CreateStat struct {
	N    int     `json:"n"`
	Mean float64 `json:"meanSeconds"`
	// Errors are the Creates that returned an error (quota, no offering…); TimedOut the
	// launches the operator did not decide on within the provider's acceptance timeout.
	Errors   int `json:"errors"`
	TimedOut int `json:"acceptanceTimeouts"`
}

func (l launchMetrics) stat() CreateStat {
	s := CreateStat{N: int(l.create.count), Errors: int(l.errors), TimedOut: int(l.timeouts)}
	if l.create.count > 0 {
		s.Mean = round3(l.create.sum / l.create.count)
	}
	return s
}

// syncedTrace is karpenter_cluster_state_synced sampled over time. Core sets the gauge only
// when something asks whether the cluster is synced (the provisioner on every batch, the
// disruption controller every 10 s, the NodePool counter on NodeClaim changes): it tells what
// core's controllers saw, and can miss a stretch nobody asked about or hold a 0 until the
// next ask. Unsynced.WithoutProviderIDSeconds is the cause, measured apart.
type syncedTrace struct {
	mu      sync.Mutex
	at      []time.Time
	value   []float64
	errs    int
	lastErr error
}

// traceSynced scrapes url every interval (or as fast as the scrapes return, if slower) until
// ctx ends. It reads the one line it needs instead of parsing the whole exposition, so the
// bench's own CPU stays out of the way at 10 scrapes a second.
func traceSynced(ctx context.Context, url string, interval time.Duration) *syncedTrace {
	tr := &syncedTrace{}
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			v, err := scrapeGauge(ctx, url, syncedMetric)
			now := time.Now()
			if ctx.Err() != nil {
				return // the window closed during the scrape
			}
			tr.mu.Lock()
			if err != nil {
				tr.errs++
				tr.lastErr = err
			} else {
				tr.at, tr.value = append(tr.at, now), append(tr.value, v)
			}
			tr.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return tr
}

// scrapeGauge reads the value of an unlabelled gauge from a Prometheus text exposition.
func scrapeGauge(ctx context.Context, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scraping %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading %s: %w", url, err)
	}
	return 0, fmt.Errorf("%s not exposed at %s", name, url)
}

// Unsynced is how long Karpenter core's cluster state was not synced in a window.
type Unsynced struct {
	// GaugeSeconds: time the sampled gauge read 0 (each sample holds until the next).
	GaugeSeconds float64 `json:"gaugeSeconds"`
	// LongestSeconds: the longest stretch of consecutive 0 samples.
	LongestSeconds float64 `json:"longestSeconds"`
	Samples        int     `json:"samples"`
	// MaxGapSeconds: the widest gap between two samples, the trace's resolution.
	MaxGapSeconds float64 `json:"maxGapSeconds"`
	ScrapeErrors  int     `json:"scrapeErrors"`
	// WithoutProviderIDSeconds: time some NodeClaim of the window had no provider ID, from
	// the bench's watch: what makes core unsynced, without the gauge's staleness.
	WithoutProviderIDSeconds float64 `json:"withoutProviderIDSeconds"`
}

func (tr *syncedTrace) unsynced(from, to time.Time) Unsynced {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	u := Unsynced{ScrapeErrors: tr.errs}
	var total, run, longest, gap time.Duration
	for i := range tr.at {
		if tr.at[i].Before(from) || tr.at[i].After(to) {
			continue
		}
		u.Samples++
		next := to
		if i+1 < len(tr.at) && tr.at[i+1].Before(to) {
			next = tr.at[i+1]
		}
		span := next.Sub(tr.at[i])
		gap = max(gap, span)
		if tr.value[i] == 0 {
			total += span
			run += span
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	u.GaugeSeconds, u.LongestSeconds, u.MaxGapSeconds = round3(total.Seconds()), round3(longest.Seconds()), round3(gap.Seconds())
	return u
}

// waitSynced waits, up to timeout, until the gauge reads 1: a burst measured from a stale 0
// left by the previous scenario would count time that is not the burst's.
func (b *Bench) waitSynced(timeout time.Duration) error {
	c := b.Env.Controller()
	return stack.Poll(context.Background(), timeout, func() error {
		v, err := scrapeGauge(context.Background(), c.MetricsURL, syncedMetric)
		if err != nil {
			return err
		}
		if v != 1 {
			return fmt.Errorf("%s is %g", syncedMetric, v)
		}
		return nil
	})
}
