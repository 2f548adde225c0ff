// Package operator is the simulated Clever Cloud node-group operator: a controller that
// turns NodeGroup objects into Node objects the way CKE does, with
// its quota, its timeline and, on demand, its failures.
//
// The operator keeps what it decided about each group in memory and derives every status
// write from that state on each reconcile. A write that fails (the apiserver restarting, a
// conflict) is therefore made again on the next reconcile: no decision can be taken without
// ever being published. The quota verdicts are not its own: it asks sim/quotaengine, a pure
// model of the platform's quota engine, and plays out what the engine decides.
package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/quotaengine"
)

// Finalizer is the finalizer the operator holds on every NodeGroup until its VMs and Nodes
// are gone. The platform's own name was not captured; this is the fixtures' spelling.
const Finalizer = "api.clever-cloud.com/finalizer"

// Operator reconciles NodeGroups into Nodes.
type Operator struct {
	client.Client
	log logr.Logger

	// quota is the platform's quota engine; its options follow opts.
	quota *quotaengine.Engine
	// kick reconciles every known group, e.g. when a platform-wide window is set.
	kick chan event.GenericEvent

	mu     sync.Mutex
	opts   Options
	groups map[types.UID]*groupState
}

// New returns an operator; register it with SetupWithManager.
func New(c client.Client, opts Options) *Operator {
	opts = withDefaults(opts)
	return &Operator{
		Client: c,
		log:    opts.Log,
		opts:   opts,
		groups: map[types.UID]*groupState{},
		quota:  quotaengine.New(engineOptions(opts)),
		kick:   make(chan event.GenericEvent, 1),
	}
}

// Options returns the options in force.
func (o *Operator) Options() Options {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.opts
}

// Configure changes options at run time (quota, hidden use, delays, faults, quirks,
// upstream-error window), e.g. between the scenarios of a test suite. Groups already judged
// keep their verdict; every group is reconciled again, so a window set or lifted shows at
// once.
func (o *Operator) Configure(mutate func(*Options)) {
	o.mu.Lock()
	mutate(&o.opts)
	o.opts = withDefaults(o.opts)
	eo := engineOptions(o.opts)
	o.mu.Unlock()
	o.quota.Configure(time.Now(), func(q *quotaengine.Options) { *q = eo })
	select {
	case o.kick <- event.GenericEvent{Object: &ngv1.NodeGroup{}}:
	default: // a kick is already queued; it will reconcile every group
	}
}

// UpstreamOutage makes every upstream call fail from `from` for d, platform-wide (Options
// UpstreamErrorFrom and UpstreamErrorFor); d = 0 lifts it.
func (o *Operator) UpstreamOutage(from time.Time, d time.Duration) {
	o.Configure(func(opts *Options) { opts.UpstreamErrorFrom, opts.UpstreamErrorFor = from, d })
}

// ResetQuotaEngine drops leaked reservations and closes any open batch to newcomers.
func (o *Operator) ResetQuotaEngine() {
	o.quota.Reset(time.Now())
}

// Quota is the quota engine the operator asks, to read what it holds (Held, Leaked). Change
// its options through Configure, which overwrites them.
func (o *Operator) Quota() *quotaengine.Engine { return o.quota }

// SetupWithManager registers the controller: NodeGroups, and Nodes mapped to their group
// through the clever-cloud.com/nodegroup label.
func (o *Operator) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Node{}, nodesByGroup, indexNodesByGroup); err != nil {
		return fmt.Errorf("indexing Nodes by NodeGroup: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("simcke-nodegroup-operator").
		For(&ngv1.NodeGroup{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
			if g := obj.GetLabels()[ngv1.LabelNodeGroup]; g != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: g}}}
			}
			return nil
		})).
		WatchesRawSource(source.Channel(o.kick, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return o.knownGroups()
		}))).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: 16,
			// Several simulated clusters may live in one test process.
			SkipNameValidation: ptr.To(true),
			// The default backoff grows to 1000 s: after an apiserver outage of a few
			// seconds a failed write would wait minutes. The platform's operator retries on
			// its own schedule, which the delays already model.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](10*time.Millisecond, time.Second),
		}).
		Complete(o)
}
