// Command conformance is `make conformance`: Karpenter core's own end-to-end suites against
// the provider on the simulated CKE, report in docs/conformance/. CONFORMANCE_FULL=1 also
// runs the specs that wait on core's long timers and writes full.{md,json} instead of
// report.{md,json}. -performance runs core's performance suite instead (make performance) and
// writes performance.{md,json}.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/conformance"
)

func main() {
	out := flag.String("out", filepath.Join(stack.ModuleRoot(), "docs", "conformance"), "report folder")
	work := flag.String("work", "", "work folder (suite binaries, logs, controller log); a new one under bin/conformance by default")
	suites := flag.String("suites", strings.Join(conformance.Suites, ","), "suites to run, comma-separated")
	bins := flag.String("bin", "", "folder of prebuilt suite binaries <suite>.test (built from test/conformance/suites when empty)")
	focus := flag.String("focus", "", "only the specs matching this ginkgo focus regexp (the report is then not written to -out unless -out is given)")
	parallel := flag.Bool("parallel", os.Getenv("CONFORMANCE_PARALLEL") == "1", "run each suite on a cluster of its own, at the same time (CONFORMANCE_PARALLEL=1)")
	performance := flag.Bool("performance", false, "run core's performance suite alone (make performance) and write performance.{md,json}")
	explore := flag.Bool("explore", false, "with -performance: lift every phase's time, heap and CPU limits so each test runs all its phases; writes performance-explore.{md,json}, figures judged against the suite's thresholds")
	baseline := flag.Bool("baseline", false, "with -performance: run the suite against Karpenter core's kwok provider in place of ours (what core alone reaches here); writes performance-baseline.{md,json}")
	audit := flag.Bool("audit", false, "write each cluster's apiserver audit log (who made which request) to its work folder")
	var ctrlEnv envFlag
	flag.Var(&ctrlEnv, "env", "KEY=VALUE[,KEY=VALUE…]: set in the controller's environment over the bundle's, e.g. COST_STEERING=false for a side-by-side run (PERF_ENV)")
	longTimers := flag.Bool("long-timers", false, "only the specs that wait on core's long timers, in CONFORMANCE_FULL=1 mode; writes full.{md,json} beside a report of the others")
	flag.Parse()
	logf.SetLogger(logr.Discard())
	full := os.Getenv("CONFORMANCE_FULL") == "1" || *longTimers
	if *longTimers {
		*focus = conformance.LongTimerFocus()
	}

	dir := *work
	if dir == "" {
		dir = filepath.Join(stack.ModuleRoot(), "bin", "conformance", time.Now().UTC().Format("20060102-150405"))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	say := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s conformance: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	list := strings.Split(*suites, ",")
	if *performance {
		list = []string{conformance.PerformanceSuite}
	}
	if slices.Contains(list, "regression") || *performance {
		if err := conformance.PortFree(conformance.KarpenterMetricsPort); err != nil {
			fail(err)
		}
	}
	rep, err := conformance.Run(ctx, conformance.Config{
		Suites: list, Full: full, Focus: *focus, WorkDir: dir, BinDir: *bins, Parallel: *parallel, Audit: *audit, Explore: *explore && *performance, Baseline: *baseline && *performance, ControllerEnv: ctrlEnv, Logf: say,
	})
	if *performance {
		finishPerformance(rep, err, *explore, *baseline, ctrlEnv, *out, dir, say)
		return
	}
	if rep != nil && len(rep.Suites) > 0 {
		base := "report"
		if full {
			base = "full"
		}
		switch {
		case *longTimers:
			rep.Mode = "CONFORMANCE_FULL=1, the long-timer specs only (report.md covers the others)"
		case *focus != "":
			base = "subset"
		}
		if werr := rep.Write(*out, base); werr != nil {
			fail(werr)
		}
		t := rep.Total()
		say("report in %s/%s.md; work folder %s", *out, base, dir)
		// The plain closing line CI readers count.
		fmt.Printf("conformance: %d passed, %d failed, %d skipped\n", t.Passed, t.Failed, t.Skipped)
		if t.Failed > 0 && err == nil {
			os.Exit(1)
		}
	}
	if err != nil {
		fail(err)
	}
}

// finishPerformance writes performance.{md,json}: the spec outcomes and every phase's figures,
// read from the reports the suite wrote into the work folder (its OUTPUT_DIR).
func finishPerformance(rep *conformance.Report, runErr error, explore, baseline bool, env map[string]string, out, dir string, say func(string, ...any)) {
	if rep == nil || len(rep.Suites) == 0 {
		fail(runErr)
	}
	rep.Mode = "performance suite"
	phases, err := conformance.ReadPhases(dir)
	if err != nil {
		fail(errors.Join(runErr, err))
	}
	pr := &conformance.PerformanceReport{Report: rep, Phases: phases, Thresholds: conformance.ThresholdsJSON(explore), Explore: explore, Baseline: baseline, ControllerEnv: env}
	if err := pr.Write(out); err != nil {
		fail(errors.Join(runErr, err))
	}
	t := rep.Total()
	say("report in %s/%s.md; work folder %s", out, pr.File(), dir)
	fmt.Printf("performance: %d passed, %d failed, %d skipped, %d figure(s) missing the suite's thresholds in %s\n", t.Passed, t.Failed, t.Skipped,
		pr.Misses(), time.Duration(rep.Seconds*float64(time.Second)).Round(time.Second))
	if runErr != nil {
		fail(runErr)
	}
	// An exploration's specs pass with lifted limits; its figures still answer to the suite's.
	if t.Failed > 0 || pr.Misses() > 0 {
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "conformance:", err)
	os.Exit(1)
}

// envFlag is -env: KEY=VALUE pairs, comma-separated or given more than once.
type envFlag map[string]string

func (e *envFlag) String() string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(*e)) {
		kv = append(kv, k+"="+(*e)[k])
	}
	return strings.Join(kv, ",")
}

func (e *envFlag) Set(v string) error {
	if *e == nil {
		*e = envFlag{}
	}
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || k == "" {
			return fmt.Errorf("-env: %q is not KEY=VALUE", pair)
		}
		(*e)[k] = val
	}
	return nil
}
