package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

var (
	shared    *Bench
	sharedErr error
	startOnce sync.Once
	stopAll   func()
	// workDir holds the controller binary TestMain built, its logs and files.
	workDir  string
	binary   string
	buildErr error
)

// harnessTests are the tests that start the simulated CKE.
var harnessTests = []string{"TestSmoke", "TestBench"}

func TestMain(m *testing.M) {
	flag.Parse()
	// The controller is built here, before m.Run starts the -timeout alarm: on a loaded
	// machine the build alone can take minutes, which no test deadline should count.
	if !testing.Short() && selected(harnessTests) {
		prebuild()
	}
	code := m.Run()
	if stopAll != nil {
		stopAll()
	}
	if workDir != "" && os.Getenv("BENCH_KEEP") == "" {
		_ = os.RemoveAll(workDir)
	} else if workDir != "" {
		fmt.Fprintln(os.Stderr, "bench: work dir (controller logs) kept in", workDir)
	}
	os.Exit(code)
}

// selected reports whether -test.run (its top-level part) selects one of tests.
func selected(tests []string) bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	top, _, _ := strings.Cut(f.Value.String(), "/")
	re, err := regexp.Compile(top)
	if err != nil {
		return true // go test reports the bad pattern itself
	}
	for _, name := range tests {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func prebuild() {
	began := time.Now()
	if workDir, buildErr = os.MkdirTemp("", "karpenter-bench-"); buildErr != nil {
		return
	}
	if binary, buildErr = stack.ControllerBinary(context.Background(), workDir); buildErr == nil {
		fmt.Fprintf(os.Stderr, "bench: controller ready in %s (outside the test deadline)\n", time.Since(began).Round(100*time.Millisecond))
	}
}

// start starts (once per test binary) the simulated CKE on profile, with the bundle and the
// controller, and the metrics sampler; later calls switch the running simulator to profile.
// Tests that need it are skipped with -short.
func start(t *testing.T, profile string) *Bench {
	t.Helper()
	if testing.Short() {
		t.Skip("bench: needs the simulated CKE; skipped with -short")
	}
	startOnce.Do(func() {
		machine := describeMachine()
		if buildErr != nil {
			sharedErr = fmt.Errorf("building the controller: %w", buildErr)
			return
		}
		if workDir == "" {
			prebuild() // TestMain did not foresee this test
			if buildErr != nil {
				sharedErr = fmt.Errorf("building the controller: %w", buildErr)
				return
			}
		}
		logf.SetLogger(logr.Discard())
		began := time.Now()
		progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		simOpts := Profiles[profile]()
		simOpts.Audit = true
		env, err := stack.Start(ctx, stack.Options{Sim: &simOpts, Binary: binary, WorkDir: workDir, Logf: progress})
		if err != nil {
			sharedErr = fmt.Errorf("starting the stack: %w", err)
			return
		}
		th, err := readThresholds()
		if err != nil {
			sharedErr = err
			_ = env.Stop()
			return
		}
		sctx, stop := context.WithCancel(context.Background())
		b := &Bench{Env: env, Sampler: &Sampler{env: env}, Report: &Report{Machine: machine},
			healthy: map[string]*healthyLaunches{}, timeouts: map[string]float64{}, thresholds: th}
		go b.Sampler.run(sctx)
		b.Report.Simulator = map[string]string{
			"control plane":    "2 × S (schedulable, counted in the quota)",
			"harness start-up": time.Since(began).Round(100 * time.Millisecond).String(),
		}
		shared = b
		stopAll = func() {
			stop()
			if err := env.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "bench: stopping:", err)
			}
		}
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	shared.UseProfile(profile)
	return shared
}

// outDir is BENCH_OUT, or def.
func outDir(def string) string {
	if d := os.Getenv("BENCH_OUT"); d != "" {
		if !filepath.IsAbs(d) {
			d = filepath.Join(stack.ModuleRoot(), d)
		}
		return d
	}
	return def
}

// TestSmoke proves the bench works end to end on one tiny scenario: a single pod, on the
// fast profile so that it stays quick and robust on a loaded machine. It runs under plain
// `go test ./...` (skipped with -short) and `make bench-smoke`.
func TestSmoke(t *testing.T) {
	b := start(t, "fast")
	var r *Result
	t.Run("single", func(t *testing.T) { r = b.Single(t, 2*time.Minute) })
	if r == nil {
		t.Fatal("no result")
	}
	out := outDir(t.TempDir())
	b.write(t, out)
	smokeCharts(t, out, r)
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
	if r.Create.N != 1 || r.Create.Mean <= 0 || r.Create.TimedOut != 0 {
		t.Errorf("single: Create figures %+v, want one Create, timed, no acceptance timeout", r.Create)
	}
	if r.PendingToRunningNewNode.N != 1 || r.ClaimToLaunched.N != 1 || r.GroupToDecision.N != 1 {
		t.Errorf("single: pending→running on a new node %+v, NodeClaim→provider ID %+v, NodeGroup→decision %+v, want one each",
			r.PendingToRunningNewNode, r.ClaimToLaunched, r.GroupToDecision)
	}
	if u := r.Unsynced; u == nil || u.Samples < 2 {
		t.Errorf("single: the cluster-state gauge was not traced: %+v", u)
	}
}

// smokeCharts: the single run's three charts are written beside the report, REPORT.md links
// them, and the series under them end with the pod Running on one Karpenter node.
func smokeCharts(t *testing.T, out string, r *Result) {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(out, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"pods-nodes", "cost", "latency"} {
		name := ChartsDir + "/single-fast-" + kind + ".svg"
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Errorf("chart %s: %v", name, err)
		}
		if !strings.Contains(string(md), "]("+name+")") {
			t.Errorf("REPORT.md does not link %s", name)
		}
	}
	se := r.Series
	if se == nil || len(se.PodsRunning) == 0 || len(se.Nodes) == 0 || len(se.FleetHourly) == 0 {
		t.Fatalf("single: series %+v", se)
	}
	last := func(ps []Point) float64 { return ps[len(ps)-1][1] }
	if last(se.PodsRunning) != 1 || last(se.PodsPending) != 0 || last(se.Nodes) != 1 || last(se.FleetHourly) <= 0 {
		t.Errorf("single: at the end %v Running, %v pending, %v nodes, %v EUR/h; want 1, 0, 1, > 0",
			last(se.PodsRunning), last(se.PodsPending), last(se.Nodes), last(se.FleetHourly))
	}
}
