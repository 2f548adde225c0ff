// Package leadership builds Karpenter core's operator with leader-election timings that let the
// leader ride out a short apiserver outage, or an apiserver too loaded to answer its renewals
// for a while, without losing its lease and exiting.
//
// Core's operator.NewOperator builds the controller-runtime manager itself and lets a provider
// set only the Lease's labels and the rest.Config leader election talks with: the lease's
// duration, renew deadline and retry period stay at controller-runtime's defaults (15 s, 10 s,
// 2 s). With those the leader gives up, and the process exits, once its renewals have failed
// for 10 to 12 s: a 10-s outage plus the time a restarted apiserver takes to answer again is
// already too long. No rest.Config can lengthen that deadline, so NewOperator mirrors core's
// NewOperator line for line and sets only what core leaves out: the three timings, and a
// connection of the leader's own. CoreVersion pins the core release it mirrors; a test fails
// when core moves, so that its changes are carried over.
//
// # The timings
//
// The leader renews every RetryPeriod. When a renewal fails it keeps trying, every RetryPeriod,
// for RenewDeadline; then it stops leading and the process exits. A standby takes the lease
// once LeaseDuration has passed since it last saw the Lease change.
//
//   - Outage ridden out: an apiserver that refuses connections (a restart) costs nothing as long
//     as it answers again within RenewDeadline − RetryPeriod of the last renewal (28 s); one whose
//     connections hang makes each attempt wait out its request timeout, RenewDeadline/2 (which
//     controller-runtime sets), so there it is RenewDeadline/2 − RetryPeriod (13 s). Both cover
//     a 10-s outage with room for the apiserver's own restart.
//   - Never two leaders: a renewal that succeeded may have answered up to its timeout,
//     RenewDeadline/2, after the apiserver wrote it, and a standby counts LeaseDuration from
//     that write at the earliest. The leader stops trying RetryPeriod + RenewDeadline after the
//     answer, so it has stopped leading RetryPeriod + RenewDeadline + RenewDeadline/2 (47 s)
//     after the write, before LeaseDuration (60 s) lets anyone else lead; the rest is what the
//     process takes to exit. The standby reads the duration from the Lease, so replicas of an
//     older release, with other timings, wait out ours and we wait out theirs.
//   - What it costs: a leader that dies without releasing its lease (SIGKILL, OOM, a lost node)
//     is replaced after up to LeaseDuration + RetryPeriod instead of 17 s; nothing provisions or
//     disrupts meanwhile. A rolling update releases the lease on SIGTERM, so the next replica
//     still leads within RetryPeriod. RetryPeriod stays at 2 s: one small write every 2 s is
//     nothing to the apiserver, and it bounds that handover.
//
// # The leader's connection
//
// Core copies the rest.Config for leader election so that the controllers' client-side rate
// limit does not apply to renewals, but client-go caches transports by TLS settings, so the
// copy still shares the controllers' HTTP/2 connection: renewals queue behind their watches
// and lists on one TCP connection and its flow-control window, and a connection that hangs
// hangs them all. Config gives leader election an HTTP/1.1 connection of its own; a renewal
// that times out closes it, so the next attempt dials afresh. On the apiserver's side the
// bundle's FlowSchema puts the Lease in the leader-election priority level.
package leadership

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"time"

	"github.com/awslabs/operatorpkg/option"
	"github.com/awslabs/operatorpkg/serrors"
	"github.com/go-logr/zapr"
	"github.com/samber/lo"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/controllers/nodeoverlay"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/state/prediction"
)

// The leader-election timings; the package documentation says why these.
const (
	LeaseDuration = 60 * time.Second
	RenewDeadline = 30 * time.Second
	RetryPeriod   = 2 * time.Second
)

// CoreVersion is the sigs.k8s.io/karpenter release whose operator.NewOperator NewOperator
// mirrors.
const CoreVersion = "v1.15.0"

// Config is the rest.Config leader election talks with: base's endpoint and credentials, on an
// HTTP/1.1 connection of its own. controller-runtime sets its request timeout (RenewDeadline/2).
func Config(base *rest.Config) *rest.Config {
	c := rest.CopyConfig(base)
	// Transports are cached by TLS settings, NextProtos among them: another value is another
	// transport, and leaving h2 out keeps a timed-out request from leaving a dead connection
	// behind for the next one.
	c.NextProtos = []string{"http/1.1"}
	return c
}

// NewOperator is core's operator.NewOperator (CoreVersion) with the leader-election timings
// above and Config's connection for leader election. Like core's, it panics on error.
func NewOperator(o ...option.Function[operator.Options]) (context.Context, *operator.Operator) {
	opts := option.Resolve(o...)

	ctx := injection.WithOptionsOrDie(context.Background(), options.Injectables...)

	// Make the binary aware of the container memory limit, as core does.
	if options.FromContext(ctx).MemoryLimit > 0 {
		newLimit := int64(float64(options.FromContext(ctx).MemoryLimit) * 0.9)
		debug.SetMemoryLimit(newLimit)
	}

	logger := serrors.NewLogger(zapr.NewLogger(logging.NewLogger(ctx, "controller")))
	log.SetLogger(logger)
	klog.SetLogger(logger)

	config := ctrl.GetConfigOrDie()
	// Copied before the controllers' QPS is set, as core does, so that their client-side rate
	// limiter never delays a renewal.
	leaderConfig := Config(config)
	if opts.LeaderElectionConfig != nil {
		leaderConfig = opts.LeaderElectionConfig
	}

	config.QPS = float32(options.FromContext(ctx).KubeClientQPS)
	config.Burst = options.FromContext(ctx).KubeClientBurst
	config.UserAgent = fmt.Sprintf("%s/%s", operator.AppName, operator.Version)

	kubernetesInterface := kubernetes.NewForConfigOrDie(config)

	log.FromContext(ctx).WithValues("version", operator.Version).V(1).Info("discovered karpenter version")

	if cfg := options.FromContext(ctx).SchedulerConfig; cfg != nil && cfg.PodTopologySpread != nil && len(cfg.PodTopologySpread.DefaultConstraints) != 0 {
		log.FromContext(ctx).WithValues("default-topology-spread-constraints", cfg.PodTopologySpread.DefaultConstraints).Info("scheduler-config is set: applying these default topology spread constraints during scheduling to pods that declare none of their own")
	}

	mgrOpts := ctrl.Options{
		Logger:                        logging.IgnoreDebugEvents(logger),
		LeaderElection:                !options.FromContext(ctx).DisableLeaderElection,
		LeaderElectionID:              options.FromContext(ctx).LeaderElectionName,
		LeaderElectionNamespace:       options.FromContext(ctx).LeaderElectionNamespace,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionConfig:          leaderConfig,
		LeaderElectionLabels:          opts.LeaderElectionLabels,
		LeaseDuration:                 new(LeaseDuration),
		RenewDeadline:                 new(RenewDeadline),
		RetryPeriod:                   new(RetryPeriod),
		Metrics: server.Options{
			BindAddress: fmt.Sprintf(":%d", options.FromContext(ctx).MetricsPort),
		},
		HealthProbeBindAddress: fmt.Sprintf(":%d", options.FromContext(ctx).HealthProbePort),
		BaseContext: func() context.Context {
			ctx := log.IntoContext(context.Background(), logger)
			ctx = injection.WithOptionsOrDie(ctx, options.Injectables...)
			return ctx
		},
		Cache: cache.Options{
			ByObject: map[client.Object]cache.ByObject{
				&coordinationv1.Lease{}: {
					Field: fields.SelectorFromSet(fields.Set{"metadata.namespace": "kube-node-lease"}),
				},
			},
		},
		Controller: ctrlconfig.Controller{
			// Warm-up starts the controllers' watches before the lease is won, so that a standby
			// leads with its caches filled; it only means something with leader election on.
			EnableWarmup: new(!options.FromContext(ctx).DisableLeaderElection && !options.FromContext(ctx).DisableControllerWarmup),
		},
	}
	if options.FromContext(ctx).EnableProfiling {
		mgrOpts.Metrics.ExtraHandlers = lo.Assign(mgrOpts.Metrics.ExtraHandlers, map[string]http.Handler{
			"/debug/pprof/":             http.HandlerFunc(pprof.Index),
			"/debug/pprof/cmdline":      http.HandlerFunc(pprof.Cmdline),
			"/debug/pprof/profile":      http.HandlerFunc(pprof.Profile),
			"/debug/pprof/symbol":       http.HandlerFunc(pprof.Symbol),
			"/debug/pprof/trace":        http.HandlerFunc(pprof.Trace),
			"/debug/pprof/allocs":       pprof.Handler("allocs"),
			"/debug/pprof/heap":         pprof.Handler("heap"),
			"/debug/pprof/block":        pprof.Handler("block"),
			"/debug/pprof/goroutine":    pprof.Handler("goroutine"),
			"/debug/pprof/threadcreate": pprof.Handler("threadcreate"),
		})
	}
	mgr, err := ctrl.NewManager(config, mgrOpts)
	mgr = lo.Must(mgr, err, "failed to setup manager")

	setupIndexers(ctx, mgr)

	lo.Must0(mgr.AddReadyzCheck("manager", func(req *http.Request) error {
		return lo.Ternary(mgr.GetCache().WaitForCacheSync(req.Context()), nil, fmt.Errorf("failed to sync caches"))
	}))
	lo.Must0(mgr.AddReadyzCheck("crd", func(_ *http.Request) error {
		objects := []client.Object{&v1.NodePool{}, &v1.NodeClaim{}}
		for _, obj := range objects {
			gvk, err := apiutil.GVKForObject(obj, scheme.Scheme)
			if err != nil {
				return fmt.Errorf("resolving the kind of %T: %w", obj, err)
			}
			if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				return fmt.Errorf("mapping %s: %w", gvk, err)
			}
		}
		return nil
	}))
	lo.Must0(mgr.AddHealthzCheck("healthz", healthz.Ping))
	lo.Must0(mgr.AddReadyzCheck("readyz", healthz.Ping))

	return ctx, &operator.Operator{
		Manager:             mgr,
		KubernetesInterface: kubernetesInterface,
		EventRecorder:       events.NewRecorder(mgr.GetEventRecorderFor(operator.AppName)), //nolint:staticcheck // SA1019: core's own recorder, until events.Recorder moves to mgr.GetEventRecorder
		Clock:               clock.RealClock{},
		InstanceTypeStore:   nodeoverlay.NewInstanceTypeStore(),
		PredictionStore:     prediction.NewStore(),
	}
}

// setupIndexers is core's (unexported) field indexers, which its controllers list by.
func setupIndexers(ctx context.Context, mgr manager.Manager) {
	lo.Must0(mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}), "failed to setup pod indexer")
	lo.Must0(mgr.GetFieldIndexer().IndexField(ctx, &corev1.Node{}, "spec.providerID", func(o client.Object) []string {
		return []string{o.(*corev1.Node).Spec.ProviderID}
	}), "failed to setup node provider id indexer")
	lo.Must0(mgr.GetFieldIndexer().IndexField(ctx, &storagev1.VolumeAttachment{}, "spec.nodeName", func(o client.Object) []string {
		return []string{o.(*storagev1.VolumeAttachment).Spec.NodeName}
	}), "failed to setup volumeattachment indexer")

	// A NodeClaim index whose CRD is not installed is logged, not fatal, as in core: the
	// controllers that do not need it still run.
	handleCRDIndexerError := func(err error, msg string) {
		noKindMatchError := &meta.NoKindMatchError{}
		if errors.As(err, &noKindMatchError) {
			log.FromContext(ctx).Error(err, msg)
		} else if err != nil {
			panic(fmt.Sprintf("%s, %s", err, msg))
		}
	}
	handleCRDIndexerError(mgr.GetFieldIndexer().IndexField(ctx, &v1.NodeClaim{}, "status.providerID", func(o client.Object) []string {
		return []string{o.(*v1.NodeClaim).Status.ProviderID}
	}), "failed to setup nodeclaim provider id indexer")
	handleCRDIndexerError(mgr.GetFieldIndexer().IndexField(ctx, &v1.NodeClaim{}, "spec.nodeClassRef.group", func(o client.Object) []string {
		return []string{o.(*v1.NodeClaim).Spec.NodeClassRef.Group}
	}), "failed to setup nodeclaim nodeclassref apiversion indexer")
	handleCRDIndexerError(mgr.GetFieldIndexer().IndexField(ctx, &v1.NodeClaim{}, "spec.nodeClassRef.kind", func(o client.Object) []string {
		return []string{o.(*v1.NodeClaim).Spec.NodeClassRef.Kind}
	}), "failed to setup nodeclaim nodeclassref kind indexer")
	handleCRDIndexerError(mgr.GetFieldIndexer().IndexField(ctx, &v1.NodeClaim{}, "spec.nodeClassRef.name", func(o client.Object) []string {
		return []string{o.(*v1.NodeClaim).Spec.NodeClassRef.Name}
	}), "failed to setup nodeclaim nodeclassref name indexer")
	handleCRDIndexerError(mgr.GetFieldIndexer().IndexField(ctx, &v1.NodePool{}, "spec.template.spec.nodeClassRef.group", func(o client.Object) []string {
		return []string{o.(*v1.NodePool).Spec.Template.Spec.NodeClassRef.Group}
	}), "failed to setup nodepool nodeclassref apiversion indexer")
	handleCRDIndexerError(mgr.GetFieldIndexer().IndexField(ctx, &v1.NodePool{}, "spec.template.spec.nodeClassRef.kind", func(o client.Object) []string {
		return []string{o.(*v1.NodePool).Spec.Template.Spec.NodeClassRef.Kind}
	}), "failed to setup nodepool nodeclassref kind indexer")
	handleCRDIndexerError(mgr.GetFieldIndexer().IndexField(ctx, &v1.NodePool{}, "spec.template.spec.nodeClassRef.name", func(o client.Object) []string {
		return []string{o.(*v1.NodePool).Spec.Template.Spec.NodeClassRef.Name}
	}), "failed to setup nodepool nodeclassref name indexer")
}
