// Package garbagecollection reconciles NodeGroups against NodeClaims on a period:
//   - reaps managed groups whose owner NodeClaim an uncached read confirms gone;
//   - refuses, loudly, groups that carry our labels but no owner reference (a hand-copied
//     manifest must never be deleted by us);
//   - fast-fails launched NodeClaims whose group vanished before the node registered, instead
//     of letting them burn Karpenter's registration timeout;
//   - surfaces groups resized out of band, and never fights them.
package garbagecollection

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/metrics"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// Event reasons.
const (
	ReasonRefused  = "NodeGroupGarbageCollectionRefused"
	ReasonReaped   = "NodeGroupGarbageCollected"
	ReasonResized  = "NodeGroupResizedOutOfBand"
	ReasonFastFail = "NodeGroupVanished"
)

// DefaultPeriod is how often garbage collection runs.
const DefaultPeriod = time.Minute

// Controller is the periodic garbage collector.
type Controller struct {
	kube     client.Client
	api      client.Reader
	recorder record.EventRecorder
	clock    clock.Clock
	period   time.Duration
	// grace protects a group just created from a claim the cache has not seen yet.
	grace time.Duration
}

// New builds the collector. api must be an uncached reader.
func New(kube client.Client, api client.Reader, recorder record.EventRecorder, clk clock.Clock, period time.Duration) *Controller {
	return &Controller{kube: kube, api: api, recorder: recorder, clock: clk, period: period, grace: 30 * time.Second}
}

// Register implements operatorpkg's controller.Controller: a leader-only loop.
func (c *Controller) Register(_ context.Context, m manager.Manager) error {
	return m.Add(manager.RunnableFunc(func(ctx context.Context) error {
		ctx = log.IntoContext(ctx, ctrl.Log.WithName("clevercloud.garbagecollection"))
		for {
			if err := c.Collect(ctx); err != nil {
				log.FromContext(ctx).Error(err, "garbage collection pass failed")
			}
			select {
			case <-ctx.Done():
				return nil
			case <-c.clock.After(c.period):
			}
		}
	}))
}

// Collect runs one pass.
func (c *Controller) Collect(ctx context.Context) error {
	groups := &ngv1.NodeGroupList{}
	if err := c.kube.List(ctx, groups); err != nil {
		return fmt.Errorf("listing nodegroups: %w", err)
	}
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims); err != nil {
		return fmt.Errorf("listing nodeclaims: %w", err)
	}
	live := map[string]*karpv1.NodeClaim{}
	for i := range claims.Items {
		live[string(claims.Items[i].UID)] = &claims.Items[i]
	}
	existing := map[string]bool{}
	refused, resized := 0, 0
	for i := range groups.Items {
		g := &groups.Items[i]
		existing[g.Name] = true
		if !nodegroup.IsManaged(g) || g.DeletionTimestamp != nil {
			continue
		}
		if g.Spec.NodeCount != 1 {
			resized++
			c.recorder.Eventf(g, corev1.EventTypeWarning, ReasonResized,
				"nodeCount is %d, Karpenter manages one-node groups; leaving it alone (only node0 has a provider ID)", g.Spec.NodeCount)
		}
		owner := nodegroup.OwnerClaim(g)
		if owner == nil {
			refused++
			c.recorder.Eventf(g, corev1.EventTypeWarning, ReasonRefused,
				"carries the provider's labels but no owner reference to a NodeClaim; not deleting it")
			log.FromContext(ctx).Info("refusing to garbage-collect a nodegroup without an owner NodeClaim", "nodegroup", g.Name)
			continue
		}
		if _, ok := live[string(owner.UID)]; ok || c.clock.Since(g.CreationTimestamp.Time) < c.grace {
			continue
		}
		if err := c.reap(ctx, g, owner.Name, owner.UID); err != nil {
			log.FromContext(ctx).Error(err, "reaping orphaned nodegroup", "nodegroup", g.Name)
		}
	}
	metrics.GarbageRefused.WithLabelValues("NoOwnerReference").Set(float64(refused))
	metrics.Resized.Set(float64(resized))
	for _, nc := range claims.Items {
		c.fastFail(ctx, &nc, existing)
	}
	return nil
}

// reap deletes a group whose owner claim is gone, after an uncached read confirms it.
func (c *Controller) reap(ctx context.Context, g *ngv1.NodeGroup, claimName string, claimUID types.UID) error {
	nc := &karpv1.NodeClaim{}
	err := c.api.Get(ctx, client.ObjectKey{Name: claimName}, nc)
	if err == nil && string(nc.UID) == string(claimUID) {
		return nil // the cache lagged; the owner is alive
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("confirming nodeclaim %q is gone: %w", claimName, err)
	}
	if err := c.kube.Delete(ctx, g, client.Preconditions{UID: &g.UID}); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("deleting nodegroup %q: %w", g.Name, err))
	}
	metrics.GarbageCollected.Inc()
	c.recorder.Eventf(g, corev1.EventTypeNormal, ReasonReaped, "owner NodeClaim %s is gone", claimName)
	log.FromContext(ctx).Info("garbage-collected orphaned nodegroup", "nodegroup", g.Name, "nodeclaim", claimName)
	return nil
}

// fastFail deletes a launched, unregistered claim whose group no longer exists.
func (c *Controller) fastFail(ctx context.Context, nc *karpv1.NodeClaim, existing map[string]bool) {
	name := nodegroup.GroupName(nc.Status.ProviderID)
	if name == "" || existing[name] || !nc.DeletionTimestamp.IsZero() {
		return
	}
	if !nc.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() || nc.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue() {
		return
	}
	if err := c.api.Get(ctx, client.ObjectKey{Name: name}, &ngv1.NodeGroup{}); !apierrors.IsNotFound(err) {
		return // still there, or we cannot tell: do nothing destructive
	}
	metrics.Vanished.WithLabelValues("registration").Inc()
	c.recorder.Eventf(nc, corev1.EventTypeWarning, ReasonFastFail, "NodeGroup %s disappeared before its node registered; deleting the NodeClaim so Karpenter relaunches", name)
	log.FromContext(ctx).Info("nodegroup vanished before registration, deleting its nodeclaim", "nodegroup", name, "nodeclaim", nc.Name)
	if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		log.FromContext(ctx).Error(err, "deleting nodeclaim of vanished nodegroup", "nodeclaim", nc.Name)
	}
}
