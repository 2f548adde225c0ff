// Command karpenter-clevercloud is Karpenter with the Clever Kubernetes Engine cloud provider.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/awslabs/operatorpkg/serrors"
	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/samber/lo"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/metrics"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/node/health"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	"sigs.k8s.io/karpenter/pkg/operator/options"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cli"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/capacity"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/garbagecollection"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/launch"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/nodeclass"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/providerid"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotastate"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotausage"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/leadership"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/pricing"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/version"
)

func main() {
	// Help, version, preflight, values and completion are answered here and exit; so is a
	// command line the controller would refuse, before anything starts.
	code, coreArgs, start := cli.Main(os.Args[1:], os.Stdout, os.Stderr)
	if !start {
		os.Exit(code)
	}
	// Karpenter core parses os.Args itself, and would stop at the optional word "controller".
	os.Args = append(os.Args[:1], coreArgs...)
	cfg, err := settings.Load()
	if err != nil {
		fmt.Fprintf(os.Stderr, "karpenter-clevercloud: invalid settings:\n%v\n", err)
		os.Exit(2)
	}

	// Karpenter core's options, read from the command line and the environment as its
	// NewOperator reads them: the ports, the Lease and whether to elect at all.
	coreCtx := injection.WithOptionsOrDie(context.Background(), options.Injectables...)
	coreOpts := options.FromContext(coreCtx)
	// Core's logger, set until NewOperator sets its own alike, so that the standby logs as the
	// leader does.
	rootLogger := serrors.NewLogger(zapr.NewLogger(logging.NewLogger(coreCtx, "controller")))
	log.SetLogger(rootLogger)
	klog.SetLogger(rootLogger)
	// Cancelling on SIGTERM lets the operator stop its runnables and then leadership release
	// the lease, so that the next replica leads at once instead of waiting out its duration; a
	// second signal kills outright.
	ctx, stop := signal.NotifyContext(log.IntoContext(context.Background(), rootLogger), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() { <-ctx.Done(); stop() }()
	logger := rootLogger.WithName("clevercloud")
	logger.Info("starting", "version", version.Version, "region", cfg.Region)

	// Loaded before the election, so that a standby reports a refused overrides file too.
	cat := lo.Must(catalog.Load(cfg.FlavorsConfigPath, cfg.Region, logger.WithName("catalog")))
	pricing.ReportRates(cat.BaseRates())

	if coreOpts.DisableLeaderElection {
		// One replica that leads without a Lease (`make run`).
		runOperator(ctx, cfg, cat, logger, nil)
		logger.Info("stopped")
		return
	}
	if err := elect(ctx, coreOpts, cfg, cat, logger); err != nil {
		// As core's NewOperator exits on a kubeconfig it cannot load.
		logger.Error(err, "leader election")
		os.Exit(1)
	}
	logger.Info("stopped")
}

// elect waits for the leader Lease, runs the operator while it holds it, and exits the process
// with code 1 when the Lease is lost. It returns nil once SIGTERM has stopped the operator and
// the Lease was released, or stopped the wait for it; an error when it could not elect.
func elect(ctx context.Context, coreOpts *options.Options, cfg settings.Settings, cat *catalog.Catalog, logger logr.Logger) error {
	// Core elects with controller-runtime's timings, which no provider can change; the
	// provider elects itself (leadership) and runs core's operator only as the leader.
	if err := os.Setenv("DISABLE_LEADER_ELECTION", "true"); err != nil {
		return fmt.Errorf("turning core's leader election off: %w", err)
	}
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig for leader election: %w", err)
	}
	lease, err := leadership.CoreLease(coreOpts.LeaderElectionName, coreOpts.LeaderElectionNamespace, os.Getenv("SYSTEM_NAMESPACE"))
	if err != nil {
		return err
	}
	identity, err := leadership.Identity()
	if err != nil {
		return err
	}
	election, err := leadership.New(lease, identity, restConfig, leadership.DefaultTimings)
	if err != nil {
		return err
	}
	standby, err := leadership.ServeStandby(logger.WithName("standby"),
		fmt.Sprintf(":%d", coreOpts.HealthProbePort), fmt.Sprintf(":%d", coreOpts.MetricsPort), crmetrics.Registry)
	if err != nil {
		return err
	}
	err = election.Run(ctx, func(ctx context.Context) {
		// Core's manager binds the health port when NewOperator builds it.
		lo.Must0(standby.ReleaseHealthPort())
		runOperator(ctx, cfg, cat, logger, func() {
			// ... and the metrics port when it starts.
			lo.Must0(standby.ReleaseMetricsPort())
		})
	})
	if errors.Is(err, leadership.ErrLeaseLost) {
		// The operator may not work on without the Lease, and is still stopping: exit now,
		// before the Lease runs out and another replica leads.
		logger.Error(err, "exiting")
		os.Exit(1)
	}
	if err != nil {
		return err
	}
	// A standby stopped by SIGTERM still serves.
	return standby.Close()
}

// runOperator builds Karpenter core's operator with the provider's cloud provider and
// controllers and runs it until ctx is cancelled. beforeStart, when not nil, runs right before
// the operator starts.
func runOperator(parent context.Context, cfg settings.Settings, cat *catalog.Catalog, logger logr.Logger, beforeStart func()) {
	coreCtx, op := operator.NewOperator()
	if !options.FromContext(coreCtx).DisableLeaderElection {
		// A --disable-leader-election=false on the command line outweighs the environment:
		// core's manager would then wait for the Lease this process holds, for ever.
		panic("Karpenter core's leader election is on beside the provider's: drop --disable-leader-election from the command line")
	}
	// Core's context carries its options, which its controllers read; parent, the end of the
	// leadership or SIGTERM.
	ctx, cancel := context.WithCancel(coreCtx)
	defer cancel()
	stopCancelling := context.AfterFunc(parent, cancel)
	defer stopCancelling()

	watcher := lo.Must(client.NewWithWatch(op.GetConfig(), client.Options{Scheme: op.GetScheme(), Mapper: op.GetRESTMapper()}))
	groups := nodegroup.NewClient(op.GetClient(), op.GetAPIReader(), watcher)

	tracker := quota.NewTracker(op.Clock, quota.Limit{CPU: int64(cfg.Quota.CPU), GB: int64(cfg.Quota.Memory)})
	// The leader launches nothing before it has read what the last leader knew of the quota.
	tracker.AwaitRestore()
	lo.Must0(op.Add(quotastate.New(op.GetClient(), op.GetAPIReader(), tracker, os.Getenv("SYSTEM_NAMESPACE"), op.Clock)))
	provider := cloudprovider.New(op.GetClient(), groups, cat, op.InstanceTypeStore, tracker, op.EventRecorder, op.Clock, cfg.AcceptanceTimeout.Duration)
	provider.SetBatchIdleDuration(cfg.BatchIdleDuration.Duration)
	provider.SetCostSteering(cfg.CostSteering)
	provider.SetCostReplacement(cfg.CostReplacement.Enabled, cfg.CostReplacement.MinNodeAge.Duration)
	undecorated := metrics.Decorate(provider)
	cloudProvider := overlay.Decorate(undecorated, op.GetClient(), op.InstanceTypeStore)
	repairPolicies := lo.Must(health.NewRepairPolicyMatcher(ctx, cloudProvider))
	clusterState := state.NewCluster(op.Clock, op.GetClient(), cloudProvider, state.WithRepairPolicyMatcher(repairPolicies))

	var prices nodeclass.Prices
	if cfg.Pricing.Enabled {
		refresher := lo.Must(pricing.New(cfg, cat.BaseRates(), &http.Client{}, op.Clock, func(_ context.Context, u pricing.Update) error {
			return cat.SetLive(u.Rates, u.Available)
		}))
		lo.Must0(op.Add(refresher))
		prices = refresher
	}

	// The preflight checks that can change at run time, repeated by the leader as a gauge.
	checks := lo.Must(preflight.NewCluster(op.GetConfig(), cat, os.Getenv("SYSTEM_NAMESPACE"), quota.Limit{CPU: int64(cfg.Quota.CPU), GB: int64(cfg.Quota.Memory)}))
	lo.Must0(op.Add(preflight.NewRunner(checks, preflight.RuntimePeriod, logger.WithName("preflight"))))

	// The provider's own controllers publish as karpenter-clevercloud; the cloud provider and the
	// launch follower share core's recorder, so that their transient-failure events dedupe.
	recorder := events.NewRecorder(op.GetEventRecorderFor("karpenter-clevercloud"))
	op.
		WithControllers(ctx, controllers.NewControllers(ctx, op.Manager, op.Clock, op.GetClient(), op.EventRecorder,
			cloudProvider, undecorated, clusterState, op.InstanceTypeStore, op.PredictionStore)...).
		WithControllers(ctx,
			nodeclass.New(op.GetClient(), op.GetRESTMapper(), prices),
			providerid.New(op.GetClient(), op.GetAPIReader(), recorder),
			capacity.New(op.GetClient(), cat),
			quotausage.New(op.GetClient(), cat, tracker),
			garbagecollection.New(op.GetClient(), op.GetAPIReader(), recorder, op.Clock, garbagecollection.DefaultPeriod),
			launch.New(op.GetClient(), op.GetAPIReader(), provider, op.EventRecorder, op.Clock, launch.Timings{
				OverdueAfter:       cfg.SyncOverdueAfter.Duration,
				GiveUpAfter:        cfg.LaunchGiveUpAfter.Duration,
				StoppedGiveUpAfter: cfg.StoppedLaunchGiveUpAfter.Duration,
			}),
		)
	if beforeStart != nil {
		beforeStart()
	}
	op.Start(ctx)
}
