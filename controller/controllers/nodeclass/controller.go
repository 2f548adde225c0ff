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
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// APIProbeInterval is how soon a class whose NodeGroup API is not served is checked again.
const APIProbeInterval = 15 * time.Second

// PricesRecheckInterval is how often a class re-reads the price refresher's freshness.
const PricesRecheckInterval = time.Minute

// Prices tells whether the prices in use are current: the price refresher implements it.
type Prices interface {
	Stale() bool
	LastSuccess() time.Time
	LastError() error
}

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
	return ctrl.NewControllerManagedBy(m).
		Named("clevercloud.nodeclass").
		For(&v1alpha1.CleverNodeClass{}).
		// A class waiting on its claims to go is released when the last one does.
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			ref := o.(*karpv1.NodeClaim).Spec.NodeClassRef
			if ref == nil || ref.Group != v1alpha1.Group || ref.Kind != "CleverNodeClass" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: ref.Name}}}
		})).
		Complete(c)
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
		c.reportPrices(class)
		result.RequeueAfter = minPositive(result.RequeueAfter, PricesRecheckInterval)
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
func (c *Controller) reportPrices(class *v1alpha1.CleverNodeClass) {
	conditions := class.StatusConditions()
	if !c.prices.Stale() {
		if last := c.prices.LastSuccess(); !last.IsZero() {
			conditions.SetTrueWithReason(v1alpha1.ConditionPricesCurrent, "Refreshed", "prices refreshed at "+last.UTC().Format(time.RFC3339))
		} else {
			conditions.SetUnknownWithReason(v1alpha1.ConditionPricesCurrent, "Pending", "waiting for the first price refresh; using the embedded catalogue")
		}
		return
	}
	msg := "prices could not be refreshed; using the last known good catalogue"
	if last := c.prices.LastSuccess(); !last.IsZero() {
		msg += " from " + last.UTC().Format(time.RFC3339)
	} else {
		msg = "prices could not be refreshed yet; using the embedded catalogue"
	}
	if err := c.prices.LastError(); err != nil {
		msg += ": " + err.Error()
	}
	conditions.SetFalse(v1alpha1.ConditionPricesCurrent, "RefreshFailing", msg)
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
// existed: every label must be accepted by the NodeGroup API.
func Validate(class *v1alpha1.CleverNodeClass) error {
	var errs []error
	labels := class.Spec.LabelMap()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if !nodegroup.Admissible(k, labels[k]) {
			errs = append(errs, fmt.Errorf("spec.labels[%q]: not accepted by the NodeGroup API", k))
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
	for _, nc := range claims.Items {
		ref := nc.Spec.NodeClassRef
		if ref != nil && ref.Group == v1alpha1.Group && ref.Kind == "CleverNodeClass" && ref.Name == class.Name {
			waiting = append(waiting, nc.Name)
		}
	}
	if len(waiting) > 0 {
		log.FromContext(ctx).Info("waiting for nodeclaims to terminate before releasing the CleverNodeClass", "count", len(waiting), "example", waiting[0])
		return reconcile.Result{}, nil // the NodeClaim watch requeues us
	}
	patch := client.MergeFromWithOptions(class.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(class, v1alpha1.TerminationFinalizer)
	if err := c.kube.Patch(ctx, class, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("removing finalizer from CleverNodeClass %q: %w", class.Name, err))
	}
	return reconcile.Result{}, nil
}
