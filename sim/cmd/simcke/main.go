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
	o := sim.DefaultOptions()
	var faults, workerPool string
	flag.StringVar(&o.BinDir, "bin-dir", os.Getenv("KUBEBUILDER_ASSETS"), "folder with the pinned binaries (./sim/tools/build.sh prints it)")
	flag.StringVar(&o.Dir, "dir", "", "work folder for kubeconfig, logs and audit log (default: a temporary folder, kept)")
	flag.BoolVar(&o.Audit, "audit", false, "write the apiserver audit log to <dir>/audit.log")
	flag.BoolVar(&o.HonorGracePeriod, "honor-grace-period", false, "keep terminating pods until their grace period ends")
	flag.IntVar(&o.ControlPlaneNodes, "control-plane-nodes", o.ControlPlaneNodes, "schedulable control-plane nodes (counted in the quota)")
	flag.StringVar(&o.ControlPlaneFlavor, "control-plane-flavor", o.ControlPlaneFlavor, "flavor of the control-plane nodes")
	flag.StringVar(&workerPool, "worker-pool", "", "pre-existing worker NodeGroup as NAME:FLAVOR:NODES, e.g. workers:S:1")
	flag.Int64Var(&o.Operator.QuotaCPU, "quota-cpu", o.Operator.QuotaCPU, "organisation quota, vCPUs")
	flag.Int64Var(&o.Operator.QuotaRAMGB, "quota-ram-gb", o.Operator.QuotaRAMGB, "organisation quota, GB")
	flag.DurationVar(&o.Operator.AcceptDelay, "accept-delay", o.Operator.AcceptDelay, "NodeGroup creation to verdict")
	flag.DurationVar(&o.Operator.BootDelay, "boot-delay", o.Operator.BootDelay, "acceptance or scale-up to Node joining")
	flag.DurationVar(&o.Operator.SlowBootDelay, "slow-boot-delay", o.Operator.SlowBootDelay, "boot delay of slow-boot groups")
	flag.DurationVar(&o.Operator.TeardownDelay, "teardown-delay", o.Operator.TeardownDelay, "delete or scale-down to Node removal")
	flag.DurationVar(&o.Operator.VanishDelay, "vanish-delay", o.Operator.VanishDelay, "acceptance to upstream deletion of vanish-after-accept groups")
	flag.DurationVar(&o.Operator.QuotaBatchWindow, "quota-batch-window", 0, "judge creations within this window together (0: off)")
	flag.DurationVar(&o.Operator.LeakedReservationTTL, "leaked-reservation-ttl", 0, "rejected groups keep their reservation this long after deletion (0: off)")
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
	fmt.Printf("simulated CKE ready in %s\n  export KUBECONFIG=%s\n  logs: %s/logs\nCtrl-C to stop.\n",
		time.Since(start).Round(100*time.Millisecond), c.KubeconfigPath(), c.Dir())
	<-ctx.Done()
	return nil
}
