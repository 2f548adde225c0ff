package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var (
	shared    *Bench
	sharedErr error
	startOnce sync.Once
	stopAll   func()
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if stopAll != nil {
		stopAll()
	}
	os.Exit(code)
}

// start starts (once per test binary) the simulated CKE with the bundle and the controller,
// and the metrics sampler. Tests that need it are skipped with -short.
func start(t *testing.T) *Bench {
	t.Helper()
	if testing.Short() {
		t.Skip("bench: needs the simulated CKE; skipped with -short")
	}
	startOnce.Do(func() {
		machine := describeMachine()
		dir, err := os.MkdirTemp("", "karpenter-bench-")
		if err != nil {
			sharedErr = err
			return
		}
		logf.SetLogger(logr.Discard())
		began := time.Now()
		progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// The bench measures against the platform's own timings.
		simOpts := sim.LiveOptions()
		simOpts.Audit = true
		env, err := harness.Start(ctx, harness.Options{Sim: &simOpts, WorkDir: dir, Logf: progress})
		if err != nil {
			sharedErr = fmt.Errorf("starting the harness: %w", err)
			return
		}
		sctx, stop := context.WithCancel(context.Background())
		b := &Bench{Env: env, Sampler: &Sampler{env: env}, Report: &Report{Machine: machine}}
		go b.Sampler.run(sctx)
		o := env.Cluster.Operator().Options()
		b.Report.Simulator = map[string]string{
			"decision delay": o.DecisionDelay.String(), "join delay (from creation)": o.JoinDelay.String(),
			"sync delay":     fmt.Sprintf("%s–%s", o.SyncDelayMin, o.SyncDelayMax),
			"teardown delay": o.TeardownDelay.String(), "default quota": fmt.Sprintf("%d vCPU / %d GB", o.QuotaCPU, o.QuotaRAMGB),
			"control plane":    "2 × S (schedulable, counted in the quota)",
			"harness start-up": time.Since(began).Round(100 * time.Millisecond).String(),
		}
		shared = b
		stopAll = func() {
			stop()
			if err := env.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "bench: stopping:", err)
			}
			if os.Getenv("BENCH_KEEP") == "" {
				_ = os.RemoveAll(dir)
			} else {
				fmt.Fprintln(os.Stderr, "bench: work dir (controller logs) kept in", dir)
			}
		}
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// outDir is BENCH_OUT, or def.
func outDir(def string) string {
	if d := os.Getenv("BENCH_OUT"); d != "" {
		if !filepath.IsAbs(d) {
			d = filepath.Join(harness.ModuleRoot(), d)
		}
		return d
	}
	return def
}

// TestSmoke proves the bench works end to end on one tiny scenario: a single pod. It runs
// under plain `go test ./...` (skipped with -short) and `make bench-smoke`.
func TestSmoke(t *testing.T) {
	b := start(t)
	var r *Result
	t.Run("single", func(t *testing.T) { r = b.Single(t, 2*time.Minute) })
	if r == nil {
		t.Fatal("no result")
	}
	b.write(t, outDir(t.TempDir()))
	if r.PodsRunning != 1 || len(r.Misses) > 0 {
		t.Errorf("single: %d pods running, misses %v", r.PodsRunning, r.Misses)
	}
	if len(r.Steps) != len(StepNames) {
		t.Errorf("single: steps %v, want all of %v", r.Steps, StepNames)
	}
	if r.Footprint.Samples == 0 || r.Footprint.PeakRSSMB == 0 {
		t.Errorf("single: no metrics samples: %+v", r.Footprint)
	}
	if r.RequestsTotal == 0 {
		t.Error("single: no apiserver request of the controller's identity in the audit log")
	}
	if r.Cost == nil || r.Cost.Bound.CostHourly <= 0 || r.Cost.FleetHourly <= 0 {
		t.Errorf("single: no cost figures: %+v", r.Cost)
	}
}
