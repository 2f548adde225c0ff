// Package conformance runs Karpenter core's own end-to-end suites (sigs.k8s.io/karpenter
// test/suites/regression and disruption, at the version go.mod pins) unmodified against the
// provider on the simulated CKE, and reports every spec: passed, failed, or skipped with the
// reason. The suites are built into test binaries from the module cache (test/conformance/
// suites is a module of its own that pins them); the cluster, the bundle and the controller
// are the ones sim/stack runs for every suite: the shipped bundle applied to a real apiserver
// and the controller binary run under the bundle's ServiceAccount with the Deployment's
// environment.
//
// `make conformance` runs everything applicable (cmd/conformance); CONFORMANCE_FULL=1 adds
// the specs that wait on core's long timers. TestConformanceSubset, part of `make test`, runs
// a representative subset.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/controlplane"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// KarpenterVersion is the core version whose suites run; test/conformance/suites/go.mod and
// the repository's go.mod pin the same.
const KarpenterVersion = "v1.15.0"

// Suites are the suites `make conformance` runs, in order.
var Suites = []string{"regression", "disruption"}

// RepairCondition is the --repair-condition the Repair specs inject: what a kubelet whose
// node has gone bad reports (Ready=False, reason KubeletNotReady), which the provider's
// RepairPolicy replaces after 10 minutes (the specs backdate it by a day). The simulated
// kubelet keeps a node so reported NotReady instead of healing it at once.
const RepairCondition = "Ready=False/KubeletNotReady"

// FeatureGates is the controller's FEATURE_GATES for the run: the bundle's defaults plus the
// gates a user turns on to use what the suites exercise (node repair, static capacity,
// capacity buffers). ReservedCapacity stays off: CKE has no reservations.
const FeatureGates = "NodeRepair=true,ReservedCapacity=false,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=true,CapacityBuffer=true"

// QuotaLifted is the simulated organisation quota (vCPU and GB): high enough that no spec
// meets it, as on an organisation with a raised quota.
const QuotaLifted = 100000

// SimOptions is the simulated CKE of a conformance run: the fast profile with the quota
// lifted, pods' grace periods honoured and no control-plane Node. Every suite spec starts by
// asserting that each Node already in the cluster is tainted ("system pool" nodes); CKE's
// control-plane nodes are schedulable and untainted, and some CKE clusters show none
// (worker-only topology): that topology is the one the suites can run on.
// The termination specs check that a draining pod keeps running through its
// terminationGracePeriodSeconds and preStop hook, as a real kubelet keeps it.
func SimOptions() sim.Options {
	o := sim.FastOptions()
	o.ControlPlaneNodes = 0
	o.HonorGracePeriod = true
	o.Operator.QuotaCPU, o.Operator.QuotaRAMGB = QuotaLifted, QuotaLifted
	return o
}

// Config shapes a run.
type Config struct {
	// Suites to run; Suites by default.
	Suites []string
	// Full also runs the specs that wait on long timers (CONFORMANCE_FULL=1).
	Full bool
	// Focus, if set, is a --ginkgo.focus regexp: only matching specs run.
	Focus string
	// WorkDir receives the suite binaries, their logs and JSON reports, and the harness's
	// files (controller log). Required.
	WorkDir string
	// BinDir holds prebuilt suite binaries <suite>.test; they are built into WorkDir when
	// empty.
	BinDir string
	// Parallel runs each suite on a cluster and controller of its own, at the same time.
	Parallel bool
	// Timeout bounds each suite binary (ginkgo's --ginkgo.timeout); 4h by default.
	Timeout time.Duration
	// Audit writes each cluster's apiserver audit log (who made which request) to its folder,
	// to find what loads the apiserver at scale.
	Audit bool
	// Explore runs the performance suite with its time, heap and CPU limits Lifted, so that
	// every phase runs and is measured; the report judges the figures against the suite's
	// thresholds all the same and says the run was an exploration.
	Explore bool
	// Baseline runs the performance suite against Karpenter core's kwok provider in place of
	// ours (baseline.go): what core alone reaches on the same control plane and machine.
	Baseline bool
	// ControllerEnv is set in the controller's environment last, over the bundle's and the
	// performance suite's: a run with one setting changed (COST_STEERING=false beside an
	// as-shipped run) is compared on the same machine.
	ControllerEnv map[string]string
	Logf          func(format string, args ...any)

	// controller is the controller binary every cluster runs; the working tree's when empty.
	controller string
}

func (c Config) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// ModuleDir is test/conformance in the repository.
func ModuleDir() string { return filepath.Join(stack.ModuleRoot(), "test", "conformance") }

// BuildSuite builds a suite's test binary from the pinned module into out.
func BuildSuite(ctx context.Context, suite, out string) error {
	return buildFromCore(ctx, fmt.Sprintf("Karpenter core's %s suite", suite), "test", "-c", "-o", out, "sigs.k8s.io/karpenter/test/suites/"+suite)
}

// buildFromCore runs go args (a build) in the suites' module, which pins Karpenter core.
func buildFromCore(ctx context.Context, what string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(ModuleDir(), "suites")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s (go %s in %s): %w\n%s", what, args[0], cmd.Dir, err, b)
	}
	return nil
}

// Run builds the suites, starts the simulated CKE with the bundle and the controller, runs
// each suite binary against it and returns the report. A suite that fails specs is not an
// error; a suite that cannot run is.
func Run(ctx context.Context, cfg Config) (_ *Report, retErr error) {
	if cfg.WorkDir == "" {
		return nil, errors.New("conformance: Config.WorkDir is required")
	}
	if len(cfg.Suites) == 0 {
		cfg.Suites = Suites
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 4 * time.Hour
	}
	rep := &Report{
		Mode: "applicable specs", Karpenter: KarpenterVersion, Commit: commit(), Started: time.Now(), Focus: cfg.Focus,
		Simulator: fmt.Sprintf("fast profile (decision 200 ms, node joined 1 s, Synced 2–3 s, teardown 1 s), quota lifted to %d vCPU / %d GB, "+
			"pods' grace periods honoured, no control-plane Node (worker-only topology), kubelets posting an unchanged node status every %s as a real kubelet does (their Leases every 10 s)",
			QuotaLifted, QuotaLifted, controlplane.KubeletStatusReport),
		Controller: fmt.Sprintf("the bundle's Deployment environment, FEATURE_GATES=%s; suites given --repair-condition=%s", FeatureGates, RepairCondition),
	}
	if slices.Contains(cfg.Suites, PerformanceSuite) {
		rep.Controller += fmt.Sprintf("; for the performance suite the organisation quota configured as the simulator's (CLEVER_CLOUD_QUOTA_CPU/MEMORY_GB=%d) and ENABLE_PROFILING=true (the suite's profiler)", QuotaLifted)
	}
	if cfg.Full {
		rep.Mode = "CONFORMANCE_FULL=1: applicable specs and long timers"
	}
	if cfg.Focus != "" {
		rep.Mode = "subset"
	}
	binDir := cfg.BinDir
	if binDir == "" {
		binDir = cfg.WorkDir
		for _, s := range cfg.Suites {
			step := time.Now()
			if err := BuildSuite(ctx, s, filepath.Join(binDir, s+".test")); err != nil {
				return nil, err
			}
			cfg.logf("built the %s suite in %s", s, time.Since(step).Round(100*time.Millisecond))
		}
	}
	if cfg.Baseline {
		step := time.Now()
		bin := filepath.Join(cfg.WorkDir, "kwok-provider")
		if err := BuildKwokProvider(ctx, bin); err != nil {
			return nil, err
		}
		cfg.controller = bin
		rep.Controller = fmt.Sprintf("**Karpenter core's kwok provider** (`sigs.k8s.io/karpenter/kwok` %s, CKE's flavors as its instance types) in place of this provider, "+
			"for a baseline: the bundle's environment and ServiceAccount (so its FlowSchemas), with cluster-admin on top for the Nodes kwok's provider creates itself", KarpenterVersion)
		cfg.logf("built core's kwok provider in %s", time.Since(step).Round(100*time.Millisecond))
	}
	if cfg.Full {
		// The Repair specs wait out the provider's repair toleration for each node they make
		// unhealthy, counted from the node's creation at the earliest: with the product's 10
		// minutes the eight of them alone would take over 80 minutes. In this mode the
		// controller links stack.RepairToleration instead; nothing but node repair reads it,
		// and the product's value is checked by the cloudprovider package's tests.
		step := time.Now()
		bin, err := stack.BuildRepairController(ctx, filepath.Join(cfg.WorkDir, "repair"))
		if err != nil {
			return nil, err
		}
		cfg.controller = bin
		rep.Controller += fmt.Sprintf("; the controller links a %s repair toleration in place of the product's 10 minutes", stack.RepairToleration)
		cfg.logf("built the controller with a %s repair toleration in %s", stack.RepairToleration, time.Since(step).Round(100*time.Millisecond))
	}

	var results [][]SuiteResult
	if cfg.Parallel {
		// One cluster and controller per suite, side by side: the suites assert on every
		// node and NodeClaim of their cluster, so they cannot share one at the same time.
		results = make([][]SuiteResult, len(cfg.Suites))
		errs := make([]error, len(cfg.Suites))
		var wg sync.WaitGroup
		for i, s := range cfg.Suites {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = onCluster(ctx, cfg, filepath.Join(cfg.WorkDir, s), binDir, []string{s})
			}()
		}
		wg.Wait()
		retErr = errors.Join(errs...)
	} else {
		res, err := onCluster(ctx, cfg, cfg.WorkDir, binDir, cfg.Suites)
		results, retErr = [][]SuiteResult{res}, err
	}
	for _, r := range results {
		rep.Suites = append(rep.Suites, r...)
	}
	rep.Seconds = round(time.Since(rep.Started).Seconds())
	return rep, retErr
}

// onCluster starts the simulated CKE with the bundle and the controller in dir, runs suites
// on it one after the other, and stops it.
func onCluster(ctx context.Context, cfg Config, dir, binDir string, suites []string) (out []SuiteResult, retErr error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	so := SimOptions()
	if cfg.Audit {
		so.Audit, so.Dir, so.KeepDir = true, filepath.Join(dir, "cluster"), true
	}
	ctrlEnv := map[string]string{"FEATURE_GATES": FeatureGates}
	if slices.Contains(suites, PerformanceSuite) {
		maps.Copy(ctrlEnv, PerformanceEnv)
	}
	maps.Copy(ctrlEnv, cfg.ControllerEnv)
	var extra []string
	if cfg.Baseline {
		var err error
		if extra, err = baselineExtra(ctx); err != nil {
			return nil, err
		}
		types, err := KwokInstanceTypes()
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, "kwok-instance-types.json")
		if err := os.WriteFile(path, types, 0o644); err != nil {
			return nil, err
		}
		ctrlEnv["INSTANCE_TYPES_FILE_PATH"] = path
	}
	env, err := stack.Start(ctx, stack.Options{
		Sim: &so, WorkDir: dir, Logf: cfg.Logf, Binary: cfg.controller,
		Env: ctrlEnv, Extra: extra,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the simulated CKE with the provider: %w", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("stopping the simulated CKE: %w", err))
		}
	}()
	if slices.Contains(suites, PerformanceSuite) {
		// The performance suite scrapes Karpenter as an in-cluster Pod (karpenterpod.go).
		kp, err := startKarpenterPod(ctx, env, KarpenterMetricsPort, ctrlEnv, cfg.logf)
		if err != nil {
			return nil, fmt.Errorf("standing in for the karpenter Pod: %w", err)
		}
		defer kp.Stop()
	}
	for _, s := range suites {
		res, err := runSuite(ctx, cfg, env, dir, s, filepath.Join(binDir, s+".test"))
		if err != nil {
			return out, err
		}
		c := res.Count()
		cfg.logf("%s: %d passed, %d failed, %d skipped in %s", s, c.Passed, c.Failed, c.Skipped,
			time.Duration(res.Seconds*float64(time.Second)).Round(time.Second))
		out = append(out, res)
		if !env.Controller().Running() {
			return out, fmt.Errorf("the controller died during the %s suite; log tail:\n%s", s, env.Controller().Tail(30))
		}
	}
	return out, nil
}

func runSuite(ctx context.Context, cfg Config, env *stack.Env, dir, suite, bin string) (SuiteResult, error) {
	skips := activeSkips(suite, cfg.Full)
	jsonPath := filepath.Join(dir, suite+".json")
	logPath := filepath.Join(dir, suite+".log")
	args := []string{
		"-test.v", "-test.timeout=0",
		"--ginkgo.json-report=" + jsonPath,
		"--ginkgo.timeout=" + cfg.Timeout.String(),
		"--ginkgo.no-color", "--ginkgo.v",
	}
	classDir := ModuleDir()
	if cfg.Baseline {
		classDir = BaselineDir()
	}
	args = append(args, "-default-nodeclass="+filepath.Join(classDir, "nodeclass.yaml"), "-default-nodepool="+filepath.Join(classDir, "nodepool.yaml"))
	if suite == "disruption" {
		args = append(args, "-repair-condition="+RepairCondition)
	}
	if re := skipRegexp(skips); re != "" {
		args = append(args, "--ginkgo.skip="+re)
	}
	if cfg.Focus != "" {
		args = append(args, "--ginkgo.focus="+cfg.Focus)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return SuiteResult{}, err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	// OUTPUT_DIR: where the suites write their per-spec timing CSVs (the temp folder otherwise).
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Cluster.KubeconfigPath(), "OUTPUT_DIR="+dir)
	if suite == PerformanceSuite {
		// The only way the suite takes a provider's thresholds; every value is in Overrides.
		cmd.Env = append(cmd.Env, "KARPENTER_PERF_THRESHOLDS="+ThresholdsJSON(cfg.Explore))
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cfg.logf("running the %s suite (log %s)", suite, logPath)
	runErr := cmd.Run()
	res, err := readSuite(suite, jsonPath, skips)
	if err != nil {
		// No report: the binary could not run at all.
		return SuiteResult{}, fmt.Errorf("the %s suite did not run (%v); log %s: %w", suite, runErr, logPath, err)
	}
	return res, nil
}

func commit() string {
	out, err := exec.Command("git", "-C", stack.ModuleRoot(), "describe", "--always", "--dirty", "--abbrev=12").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
