// Command simcke runs a simulated Clever Kubernetes Engine until interrupted and prints the
// path of its admin kubeconfig.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "simcke:", err)
		os.Exit(1)
	}
}

func run() error {
	// The profile picks the defaults every other flag starts from, so it is read first.
	profile := "live"
	for i, a := range os.Args[1:] {
		switch {
		case a == "-profile" || a == "--profile":
			if i+2 < len(os.Args) {
				profile = os.Args[i+2]
			}
		case strings.HasPrefix(a, "-profile=") || strings.HasPrefix(a, "--profile="):
			profile = a[strings.Index(a, "=")+1:]
		}
	}
	var o sim.Options
	switch profile {
	case "live":
		o = sim.LiveOptions()
	case "fast":
		o = sim.FastOptions()
	default:
		return fmt.Errorf("unknown -profile %q (live or fast)", profile)
	}
	op := &o.Operator
	var faults, workerPool string
	var outageAt, outageFor time.Duration
	flag.String("profile", profile, "timings and quirks to start from: live (measured on CKE) or fast (compressed, for tests); the flags below override it")
	flag.StringVar(&o.BinDir, "bin-dir", os.Getenv("KUBEBUILDER_ASSETS"), "folder with the pinned binaries (./sim/tools/build.sh prints it; built when empty)")
	flag.StringVar(&o.Dir, "dir", "", "work folder for kubeconfig, logs and audit log (default: a temporary folder, kept)")
	flag.BoolVar(&o.Audit, "audit", false, "write the apiserver audit log to <dir>/audit.log")
	flag.BoolVar(&o.HonorGracePeriod, "honor-grace-period", false, "keep terminating pods until their grace period ends")
	flag.IntVar(&o.ControlPlaneNodes, "control-plane-nodes", o.ControlPlaneNodes, "schedulable control-plane nodes (counted in the quota)")
	flag.StringVar(&o.ControlPlaneFlavor, "control-plane-flavor", o.ControlPlaneFlavor, "flavor of the control-plane nodes")
	flag.StringVar(&workerPool, "worker-pool", "", "pre-existing worker NodeGroup as NAME:FLAVOR:NODES, e.g. workers:S:1")
	flag.Int64Var(&op.QuotaCPU, "quota-cpu", op.QuotaCPU, "organisation quota, vCPUs")
	flag.Int64Var(&op.QuotaRAMGB, "quota-ram-gb", op.QuotaRAMGB, "organisation quota, GB")
	flag.Int64Var(&op.OtherClusterCPU, "other-cluster-cpu", op.OtherClusterCPU, "vCPUs of the quota the organisation's other clusters use (counted, invisible in this cluster)")
	flag.Int64Var(&op.OtherClusterGB, "other-cluster-gb", op.OtherClusterGB, "GB of the quota the organisation's other clusters use (counted, invisible in this cluster)")
	flag.DurationVar(&op.DecisionDelay, "decision-delay", op.DecisionDelay, "NodeGroup creation to the operator's first status write (Creating or QuotaExceeded)")
	flag.DurationVar(&op.JoinDelay, "join-delay", op.JoinDelay, "NodeGroup creation (or resize) to the Node joining: the fastest join when -join-delay-max spreads them")
	flag.DurationVar(&op.JoinDelayMax, "join-delay-max", op.JoinDelayMax, "upper bound of the per-group join draw, skewed toward -join-delay (0: every group joins at -join-delay)")
	flag.Float64Var(&op.SlowJoinProbability, "slow-join-probability", op.SlowJoinProbability, "chance that a group's node joins only after -slow-boot-delay")
	flag.DurationVar(&op.SyncDelayMin, "sync-delay-min", op.SyncDelayMin, "NodeGroup creation to Synced/Ready, lower bound of the per-group draw")
	flag.DurationVar(&op.SyncDelayMax, "sync-delay-max", op.SyncDelayMax, "NodeGroup creation to Synced/Ready, upper bound of the per-group draw")
	flag.Float64Var(&op.SlowSyncProbability, "slow-sync-probability", op.SlowSyncProbability, "chance that a group syncs only after -slow-sync-delay")
	flag.DurationVar(&op.SlowSyncDelay, "slow-sync-delay", op.SlowSyncDelay, "creation to Synced of the slow outliers")
	flag.Uint64Var(&op.Seed, "seed", op.Seed, "seed of the per-group draws (same seed and group names: same timeline)")
	flag.DurationVar(&op.TeardownDelay, "teardown-delay", op.TeardownDelay, "delete or scale-down to VM gone and Node deleted")
	flag.DurationVar(&op.VanishDelay, "vanish-delay", op.VanishDelay, "acceptance to upstream deletion of vanish-after-accept groups")
	flag.DurationVar(&op.SlowBootDelay, "slow-boot-delay", op.SlowBootDelay, "creation to Node joining for slow-boot groups and slow joins")
	flag.DurationVar(&op.UpstreamErrorDuration, "upstream-error-duration", op.UpstreamErrorDuration, "how long the upstream-error fault lasts on each upstream call")
	flag.DurationVar(&outageAt, "upstream-error-at", 0, "start of a platform-wide upstream failure, after the cluster is ready (with -upstream-error-for)")
	flag.DurationVar(&outageFor, "upstream-error-for", 0, "length of the platform-wide upstream failure (0: none)")
	flag.StringVar(&op.UnknownFailureReason, "unknown-failure-reason", op.UnknownFailureReason, "ReconcileFailed reason of the unknown-refusal and dead-launch faults (default "+operator.ReasonNetworkUnavailable+")")
	flag.DurationVar(&op.QuotaBatchWindow, "quota-batch-window", op.QuotaBatchWindow, "judge creations within this window together (0: off)")
	flag.DurationVar(&op.LeakedReservationTTL, "leaked-reservation-ttl", op.LeakedReservationTTL, "refused groups, and groups deleted during their creation, keep their reservation this long (0: off)")
	flag.BoolVar(&op.LegacyQuotaMessage, "legacy-quota-message", op.LegacyQuotaMessage, "write the 2026-06 refusal message (Quota exceeded: RAM max: …) instead of today's empty one")
	flag.BoolVar(&op.StampTopologyLabels, "stamp-topology-labels", op.StampTopologyLabels, "put topology.kubernetes.io/region and zone on nodes (today's CKE does not)")
	flag.StringVar(&faults, "faults", "", "faults for every group without the "+operator.FaultAnnotation+" annotation, comma-separated")
	flag.Parse()

	for _, f := range strings.Split(faults, ",") {
		if f = strings.TrimSpace(f); f != "" {
			o.Operator.Faults = append(o.Operator.Faults, operator.Fault(f))
		}
	}
	if workerPool != "" {
		var wp sim.WorkerPool
		if _, err := fmt.Sscanf(strings.ReplaceAll(workerPool, ":", " "), "%s %s %d", &wp.Name, &wp.Flavor, &wp.Nodes); err != nil {
			return fmt.Errorf("parsing -worker-pool %q: %w", workerPool, err)
		}
		o.WorkerPool = &wp
	}
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "simcke-")
		if err != nil {
			return fmt.Errorf("creating work folder: %w", err)
		}
		o.Dir = dir
	}
	log := zap.New(zap.UseDevMode(true))
	ctrl.SetLogger(log)
	o.Log = &log

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	c, err := sim.Start(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "simcke: stopping:", err)
		}
	}()
	if outageFor > 0 {
		c.Operator().UpstreamOutage(time.Now().Add(outageAt), outageFor)
	}
	fmt.Printf("simulated CKE ready in %s\n  export KUBECONFIG=%s\n  logs: %s/logs\nCtrl-C to stop.\n",
		time.Since(start).Round(100*time.Millisecond), c.KubeconfigPath(), c.Dir())
	<-ctx.Done()
	return nil
}
