package bench

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ThresholdsEnv overrides the bench's targets, as KARPENTER_PERF_THRESHOLDS does for
// Karpenter's performance suite: a comma-separated list of key=value, each key one of the
// targets the report names. An override is written into the report beside the check it
// moves, so every deviation from the defaults shows; an unknown key fails the run.
const ThresholdsEnv = "BENCH_THRESHOLDS"

// thresholds holds the overrides read from ThresholdsEnv and the keys the run asked for.
type thresholds struct {
	mu        sync.Mutex
	overrides map[string]float64
	asked     map[string]bool
}

// parseThresholds reads a ThresholdsEnv value.
func parseThresholds(v string) (*thresholds, error) {
	t := &thresholds{overrides: map[string]float64{}, asked: map[string]bool{}}
	for _, kv := range strings.Split(v, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not key=value", ThresholdsEnv, kv)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", ThresholdsEnv, k, err)
		}
		t.overrides[strings.TrimSpace(k)] = f
	}
	return t, nil
}

// get returns the threshold key, overridden or def, and whether it was overridden.
func (t *thresholds) get(key string, def float64) (float64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.asked[key] = true
	if v, ok := t.overrides[key]; ok {
		return v, true
	}
	return def, false
}

// unknown lists the overrides no check asked for: a typo would otherwise leave the default
// in force and the run green.
func (t *thresholds) unknown() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for k := range t.overrides {
		if !t.asked[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Threshold is the target named key: def, unless ThresholdsEnv overrides it, in which case
// the override is recorded in the report.
func (b *Bench) Threshold(key string, def float64) float64 {
	v, overridden := b.thresholds.get(key, def)
	if overridden {
		if b.Report.Overrides == nil {
			b.Report.Overrides = map[string]string{}
		}
		b.Report.Overrides[key] = fmt.Sprintf("%g (default %g)", v, def)
	}
	return v
}

// missed lists the checks whose target was not met, and the overrides no check used.
func (b *Bench) missed() []string {
	var out []string
	for _, c := range b.Report.Checks {
		if c.Met != nil && !*c.Met {
			out = append(out, fmt.Sprintf("[%s] %s: %s, target %s", c.Profile, c.Measure, c.Value, c.Target))
		}
	}
	for _, k := range b.thresholds.unknown() {
		out = append(out, fmt.Sprintf("%s names %q, which no check of this run has", ThresholdsEnv, k))
	}
	return out
}

// readThresholds parses ThresholdsEnv from the environment.
func readThresholds() (*thresholds, error) { return parseThresholds(os.Getenv(ThresholdsEnv)) }
