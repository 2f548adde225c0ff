// Command karpenter-clevercloud is Karpenter with the Clever Kubernetes Engine cloud provider.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/samber/lo"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/metrics"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/node/health"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"

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

	// Core's operator, with lease timings that ride out a short apiserver outage (leadership's
	// documentation).
	ctx, op := leadership.NewOperator()
	// Karpenter core runs its manager on a context nothing cancels, so SIGTERM alone would kill
	// the process outright, the leader lease still held, and the next replica would wait out its
	// duration. Cancelling on SIGTERM lets the manager stop its runnables and release the
	// lease (core sets LeaderElectionReleaseOnCancel); a second signal kills outright.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() { <-ctx.Done(); stop() }()
	logger := log.FromContext(ctx).WithName("clevercloud")
	logger.Info("starting", "version", version.Version, "region", cfg.Region)

	cat := lo.Must(catalog.Load(cfg.FlavorsConfigPath, cfg.Region, logger.WithName("catalog")))
	watcher := lo.Must(client.NewWithWatch(op.GetConfig(), client.Options{Scheme: op.GetScheme(), Mapper: op.GetRESTMapper()}))
	groups := nodegroup.NewClient(op.GetClient(), op.GetAPIReader(), watcher)

	tracker := quota.NewTracker(op.Clock, quota.Limit{CPU: int64(cfg.Quota.CPU), GB: int64(cfg.Quota.Memory)})
	// The leader launches nothing before it has read what the last leader knew of the quota.
	tracker.AwaitRestore()
	lo.Must0(op.Add(quotastate.New(op.GetClient(), op.GetAPIReader(), tracker, os.Getenv("SYSTEM_NAMESPACE"), op.Clock)))
	provider := cloudprovider.New(op.GetClient(), groups, cat, op.InstanceTypeStore, tracker, op.EventRecorder, op.Clock, cfg.AcceptanceTimeout.Duration)
	provider.SetBatchIdleDuration(cfg.BatchIdleDuration.Duration)
	undecorated := metrics.Decorate(provider)
	cloudProvider := overlay.Decorate(undecorated, op.GetClient(), op.InstanceTypeStore)
	repairPolicies := lo.Must(health.NewRepairPolicyMatcher(ctx, cloudProvider))
	clusterState := state.NewCluster(op.Clock, op.GetClient(), cloudProvider, state.WithRepairPolicyMatcher(repairPolicies))

	pricing.ReportRates(cat.BaseRates())
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
		).
		Start(ctx)
	logger.Info("stopped")
}
