// Package nodeclass reconciles CleverNodeClass status (validation, NodeGroup API served,
// Ready) and holds a finalizer until no NodeClaim references the class, so deleting a class
// never strands the nodes built from it.
package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/labels"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/pricing"
)

// APIProbeInterval is how soon a class whose NodeGroup API is not served is checked again.
const APIProbeInterval = 15 * time.Second

// Prices is the price refresher as the PricesCurrent condition sees it
// (*pricing.Refresher implements it).
type Prices interface {
	// Status is a snapshot of the refresher's state.
	Status() pricing.Status
	// Subscribe returns a channel signalled whenever Status may have changed: after every
	// refresh attempt and when prices pass their staleness deadline.
	Subscribe() <-chan struct{}
}

// Condition reasons of PricesCurrent.
const (
	// PricesPending (Unknown): no refresh has ended yet; the embedded catalogue is in use.
	PricesPending = "Pending"
	// PricesRefreshed (True): rates and flavor availability come from the API.
	PricesRefreshed = "Refreshed"
	// PricesProductListingUnavailable (True): rates come from the price system, but the
	// product listing could not be read (401 since 2026-09), so availability is the
	// catalogue's and the topology is ignored.
	PricesProductListingUnavailable = "ProductListingUnavailable"
	// PricesRefreshFailing (False): stale by pricing.Status.Stale's rule, no success for
	// more than pricing.StaleAfterPeriods refresh periods, or none at all after an attempt.
	PricesRefreshFailing = "RefreshFailing"
)

// priceListRetry is how soon enqueueing the classes is retried after a failed list (of the
// informer cache, so only while it is starting or stopping).
const priceListRetry = time.Second

// Controller reconciles CleverNodeClasses.
type Controller struct {
	kube   client.Client
	mapper meta.RESTMapper
	prices Prices
}

// New builds the controller. The mapper answers whether the NodeGroup API is served; prices
// is nil when the refresher is off, and the PricesCurrent condition is then not reported.
func New(kube client.Client, mapper meta.RESTMapper, prices Prices) *Controller {
	return &Controller{kube: kube, mapper: mapper, prices: prices}
}

// Register implements operatorpkg's controller.Controller.
func (c *Controller) Register(_ context.Context, m manager.Manager) error {
	b := ctrl.NewControllerManagedBy(m).
		Named("clevercloud.nodeclass").
		For(&v1alpha1.CleverNodeClass{}).
		// A class waiting on its claims to go is released when the last one does.
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name, ok := v1alpha1.NodeClassName(o.(*karpv1.NodeClaim))
			if !ok {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: name}}}
		}))
	if c.prices != nil {
		b = b.WatchesRawSource(c.priceChanges())
	}
	return b.Complete(c)
}

// priceChanges is a source that enqueues every CleverNodeClass whenever the refresher says
// its state may have changed, so that PricesCurrent follows a refresh (or the staleness
// deadline) within a reconcile, rather than at a periodic recheck that lagged by up to its
// interval.
func (c *Controller) priceChanges() source.Source {
	changes := c.prices.Subscribe()
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		logger := log.FromContext(ctx).WithName("prices")
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-changes:
				}
				for {
					err := c.enqueueAll(ctx, q)
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						return
					}
					logger.Error(err, "enqueueing CleverNodeClasses after a price refresher change; retrying", "retryIn", priceListRetry)
					select {
					case <-ctx.Done():
						return
					case <-time.After(priceListRetry):
					}
				}
			}
		}()
		return nil
	})
}

func (c *Controller) enqueueAll(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	classes := &v1alpha1.CleverNodeClassList{}
	if err := c.kube.List(ctx, classes); err != nil {
		return fmt.Errorf("listing CleverNodeClasses: %w", err)
	}
	for _, class := range classes.Items {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: class.Name}})
	}
	return nil
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	class := &v1alpha1.CleverNodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !class.DeletionTimestamp.IsZero() {
		return c.finalize(ctx, class)
	}
	if !controllerutil.ContainsFinalizer(class, v1alpha1.TerminationFinalizer) {
		patch := client.MergeFromWithOptions(class.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(class, v1alpha1.TerminationFinalizer)
		if err := c.kube.Patch(ctx, class, patch); err != nil {
			if apierrors.IsConflict(err) {
				// The finalizer patches carry the cached resourceVersion: a conflict only says the
				// cache is behind the apiserver, not that anything failed; retry on the newer copy.
				return reconcile.Result{Requeue: true}, nil
			}
			return reconcile.Result{}, fmt.Errorf("adding finalizer to CleverNodeClass %q: %w", class.Name, err)
		}
	}

	before := class.DeepCopy()
	conditions := class.StatusConditions()
	if err := Validate(class); err != nil {
		conditions.SetFalse(v1alpha1.ConditionValidationSucceeded, "InvalidSpec", err.Error())
	} else {
		conditions.SetTrue(v1alpha1.ConditionValidationSucceeded)
	}
	served, err := c.nodeGroupAPIServed()
	var result reconcile.Result
	switch {
	case err != nil:
		conditions.SetUnknownWithReason(v1alpha1.ConditionNodeGroupAPIServed, "DiscoveryFailed", err.Error())
		result.RequeueAfter = APIProbeInterval
	case !served:
		conditions.SetFalse(v1alpha1.ConditionNodeGroupAPIServed, "NotServed",
			"the cluster does not serve nodegroups.api.clever-cloud.com/v1: is this a Clever Kubernetes Engine cluster?")
		result.RequeueAfter = APIProbeInterval
	default:
		conditions.SetTrue(v1alpha1.ConditionNodeGroupAPIServed)
	}
	if c.prices != nil {
		status := c.prices.Status()
		reportPrices(class, status)
		// Every change reaches us through the refresher's signal (priceChanges); looking again
		// just past the staleness deadline as well costs one reconcile per class per success
		// and keeps the condition exact should a signal be lost.
		if status.StaleIn > 0 {
			result.RequeueAfter = minPositive(result.RequeueAfter, status.StaleIn)
		}
	}
	if !equality.Semantic.DeepEqual(before.Status, class.Status) {
		if err := c.kube.Status().Patch(ctx, class, client.MergeFrom(before)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("updating CleverNodeClass %q status: %w", class.Name, err))
		}
	}
	return result, nil
}

// reportPrices sets PricesCurrent, which is informational: stale prices must never stop
// provisioning, so it is not one of Ready's dependencies.
func reportPrices(class *v1alpha1.CleverNodeClass, st pricing.Status) {
	conditions := class.StatusConditions()
	if !st.Stale {
		switch {
		case st.LastSuccess.IsZero():
			conditions.SetUnknownWithReason(v1alpha1.ConditionPricesCurrent, PricesPending, "waiting for the first price refresh; using the embedded catalogue")
		case st.Listing.Readable:
			msg := "prices refreshed at " + st.LastSuccess.UTC().Format(time.RFC3339) + "; flavors offered as the product listing lists them"
			if st.Topology != "" {
				msg += fmt.Sprintf(" for topology %q", st.Topology)
			}
			conditions.SetTrueWithReason(v1alpha1.ConditionPricesCurrent, PricesRefreshed, msg)
		default:
			conditions.SetTrueWithReason(v1alpha1.ConditionPricesCurrent, PricesProductListingUnavailable,
				"prices refreshed at "+st.LastSuccess.UTC().Format(time.RFC3339)+" from the price system; "+listingMessage(st))
		}
		return
	}
	msg := "prices could not be refreshed; using the last known good catalogue"
	if !st.LastSuccess.IsZero() {
		msg += " from " + st.LastSuccess.UTC().Format(time.RFC3339)
	} else {
		msg = "prices could not be refreshed yet; using the embedded catalogue"
	}
	if st.LastError != nil {
		msg += ": " + st.LastError.Error()
	}
	conditions.SetFalse(v1alpha1.ConditionPricesCurrent, PricesRefreshFailing, msg)
}

// listingMessage says why flavor availability comes from the catalogue, and that the
// topology, which only the listing can apply, is ignored meanwhile.
func listingMessage(st pricing.Status) string {
	msg := "flavor availability comes from the catalogue because the product listing "
	if st.Listing.StatusCode != 0 {
		msg += "answered " + st.Listing.Problem
	} else {
		msg += "could not be read: " + st.Listing.Problem
	}
	if st.Topology != "" {
		msg += fmt.Sprintf("; topology %q (CLEVER_CLOUD_TOPOLOGY) is ignored until the listing is readable", st.Topology)
	}
	return msg
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}

// nodeGroupAPIServed asks discovery, resetting the mapper's cache when the answer is "no",
// so a CRD installed after start-up is seen.
func (c *Controller) nodeGroupAPIServed() (bool, error) {
	gvk := ngv1.GroupVersion.WithKind("NodeGroup")
	_, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		return true, nil
	}
	if meta.IsNoMatchError(err) {
		if r, ok := c.mapper.(meta.ResettableRESTMapper); ok {
			r.Reset()
			if _, err := c.mapper.RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version); err == nil {
				return true, nil
			}
		}
		return false, nil
	}
	return false, err
}

// Validate re-checks what the CRD's CEL rules check, for classes admitted before a rule
// existed: every label must be the user's to set (labels.Check), a valid label that neither
// Karpenter, the provider nor the platform owns. A class that fails is not Ready, so nothing is
// launched from it, and its ValidationSucceeded condition names each offending label.
func Validate(class *v1alpha1.CleverNodeClass) error {
	var errs []error
	m := class.Spec.LabelMap()
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := labels.Check(k, m[k]); err != nil {
			errs = append(errs, fmt.Errorf("spec.labels: %w", err))
		}
	}
	return errors.Join(errs...)
}

// finalize releases the class once no NodeClaim built from it remains.
func (c *Controller) finalize(ctx context.Context, class *v1alpha1.CleverNodeClass) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(class, v1alpha1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodeclaims: %w", err)
	}
	var waiting []string
	for i := range claims.Items {
		if name, ok := v1alpha1.NodeClassName(&claims.Items[i]); ok && name == class.Name {
			waiting = append(waiting, claims.Items[i].Name)
		}
	}
	if len(waiting) > 0 {
		log.FromContext(ctx).Info("waiting for nodeclaims to terminate before releasing the CleverNodeClass", "count", len(waiting), "example", waiting[0])
		return reconcile.Result{}, nil // the NodeClaim watch requeues us
	}
	patch := client.MergeFromWithOptions(class.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(class, v1alpha1.TerminationFinalizer)
	if err := c.kube.Patch(ctx, class, patch); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil // the cache was behind, as above
		}
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("removing finalizer from CleverNodeClass %q: %w", class.Name, err))
	}
	return reconcile.Result{}, nil
}
