// Package garbagecollection reconciles NodeGroups against NodeClaims:
//   - reaps managed groups whose owner NodeClaim is gone, with nodegroup.ConfirmOrphan's proof
//     (the group named and labelled after the claim it names, both re-read uncached);
//   - refuses, loudly, groups that carry our labels but are not proven ours: no NodeClaim UID,
//     or not named after the claim they name (a hand-copied, renamed manifest keeps the labels
//     and the annotations; it must never be deleted by us);
//   - moves groups that record their claim in an owner reference (the upstream provider's and
//     our earlier versions' way) to the claim UID annotation, so that a claim deleted with
//     foreground propagation does not take its VM down before the drain; like every write to
//     a group, only once nodegroup.MigrateOwner proves it the claim's on uncached reads (a
//     hand-made copy with an owner reference is refused, never patched);
//   - fast-fails launched NodeClaims whose group vanished before the node registered, instead
//     of letting them burn Karpenter's registration timeout;
//   - surfaces groups resized out of band, and never fights them.
//
// A pass runs on a period and, sooner, when a NodeGroup is deleted, when a group that needs
// reporting (no owner, resized) or migrating appears or changes, or when a NodeClaim is launched but
// unregistered: the platform deletes groups upstream, and a fast-fail that waits for the next
// period costs that claim up to a period of pending pods. The period stays as the backstop for
// missed events and for reaping, which waits out a grace anyway. Kicks are coalesced and
// debounced, so a burst of deletions costs one pass; since passes can then be frequent, a
// group's event is published when first found and then every remindEvery, not per pass.
package garbagecollection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/awslabs/operatorpkg/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// DefaultPeriod is how often garbage collection runs when nothing kicks it sooner.
const DefaultPeriod = time.Minute

// debounce is how long a kicked pass waits for the rest of a burst of events.
const debounce = time.Second

// remindEvery is how often a refused or resized group is reported again while it stays so:
// often enough that its event never expires (an hour by default), rarely enough not to spam.
const remindEvery = 10 * time.Minute

// Controller is the garbage collector.
type Controller struct {
	kube     client.Client
	api      client.Reader
	recorder events.Recorder
	clock    clock.Clock
	period   time.Duration
	// grace protects a group just created from a claim the cache has not seen yet.
	grace time.Duration
	// remind is remindEvery; tests shorten it, since the recorder's dedupe keeps real time.
	remind time.Duration
	// kicks holds at most one pending request for an early pass; senders never block.
	kicks chan struct{}
}

// New builds the collector. api must be an uncached reader.
func New(kube client.Client, api client.Reader, recorder events.Recorder, clk clock.Clock, period time.Duration) *Controller {
	return &Controller{kube: kube, api: api, recorder: recorder, clock: clk, period: period, grace: 30 * time.Second,
		remind: remindEvery, kicks: make(chan struct{}, 1)}
}

// Register implements operatorpkg's controller.Controller: a leader-only loop, kicked early by
// informer events. The handlers run on every replica, but only the leader drains the kicks; on
// the others one kick waits, harmlessly, in the channel.
func (c *Controller) Register(ctx context.Context, m manager.Manager) error {
	groups, err := m.GetCache().GetInformer(ctx, &ngv1.NodeGroup{})
	if err != nil {
		return fmt.Errorf("getting the nodegroup informer for garbage collection: %w", err)
	}
	if _, err := groups.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.kickIfNeedsReport(obj) },
		UpdateFunc: func(_, obj any) { c.kickIfNeedsReport(obj) },
		DeleteFunc: func(any) { c.kick() }, // tombstones (DeletedFinalStateUnknown) included
	}); err != nil {
		return fmt.Errorf("watching nodegroups for garbage collection: %w", err)
	}
	claims, err := m.GetCache().GetInformer(ctx, &karpv1.NodeClaim{})
	if err != nil {
		return fmt.Errorf("getting the nodeclaim informer for garbage collection: %w", err)
	}
	if _, err := claims.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.kickIfAwaitingRegistration(obj) },
		UpdateFunc: func(_, obj any) { c.kickIfAwaitingRegistration(obj) },
	}); err != nil {
		return fmt.Errorf("watching nodeclaims for garbage collection: %w", err)
	}
	if err := m.Add(manager.RunnableFunc(c.run)); err != nil {
		return fmt.Errorf("adding the garbage collection loop: %w", err)
	}
	return nil
}

// kick asks for an early pass. It never blocks: kicks made while one is pending coalesce.
func (c *Controller) kick() {
	select {
	case c.kicks <- struct{}{}:
	default:
	}
}

// kickIfNeedsReport kicks for a group that looks managed but is not shaped for its claim (no
// claim UID, or a copy under another name), or was resized: the user should hear about it
// now, not a period later; and for a group whose claim is still an owner reference, which is
// at risk until it is migrated.
func (c *Controller) kickIfNeedsReport(obj any) {
	g, ok := obj.(*ngv1.NodeGroup)
	if !ok || !nodegroup.IsManaged(g) || g.DeletionTimestamp != nil {
		return
	}
	if _, err := nodegroup.ClaimOf(g); err != nil || nodegroup.LegacyOwnerReference(g) != nil || g.Spec.NodeCount != 1 {
		c.kick()
	}
}

// kickIfAwaitingRegistration kicks for a claim that fastFail could act on: the group may have
// vanished before the claim was marked launched, when a group deletion alone found nothing.
//
// obj is the informer's shared object, which every controller's handlers and predicates read
// at once: it is only read here. A plain StatusConditions() fills in a new claim's missing
// conditions in place, and did so while core's reboot predicate read the same slice; the
// controller crashed with a nil dereference in ConditionSet.Get.
func (c *Controller) kickIfAwaitingRegistration(obj any) {
	nc, ok := obj.(*karpv1.NodeClaim)
	if !ok || !nc.DeletionTimestamp.IsZero() {
		return
	}
	conds := nc.StatusConditions(status.WithObservedOnly())
	if conds.Get(karpv1.ConditionTypeLaunched).IsTrue() && !conds.Get(karpv1.ConditionTypeRegistered).IsTrue() {
		c.kick()
	}
}

// run is the loop: a pass at start, then one per period or, debounced, per kick.
func (c *Controller) run(ctx context.Context) error {
	ctx = log.IntoContext(ctx, ctrl.Log.WithName("clevercloud.garbagecollection"))
	c.drain() // the first pass covers whatever was kicked before this replica led
	for {
		if err := c.collect(ctx); err != nil {
			log.FromContext(ctx).Error(err, "garbage collection pass failed")
		}
		if !c.wait(ctx) {
			return nil
		}
	}
}

// wait blocks until the next pass is due, and reports false once ctx is done.
func (c *Controller) wait(ctx context.Context) bool {
	period := c.clock.NewTimer(c.period)
	defer period.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-period.C():
		return true
	case <-c.kicks:
	}
	settle := c.clock.NewTimer(debounce)
	defer settle.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-settle.C():
	}
	c.drain() // the pass about to run covers the rest of the burst
	log.FromContext(ctx).V(1).Info("garbage collection pass kicked by an event", "debounce", debounce)
	return true
}

// drain drops a pending kick, if any.
func (c *Controller) drain() {
	select {
	case <-c.kicks:
	default:
	}
}

// collect runs one pass.
func (c *Controller) collect(ctx context.Context) error {
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
	refused := map[string]int{nodegroup.ReasonNoOwnerClaim: 0, nodegroup.ReasonNotNamedForItsClaim: 0}
	resized := 0
	for i := range groups.Items {
		g := &groups.Items[i]
		existing[g.Name] = true
		if !nodegroup.IsManaged(g) || g.DeletionTimestamp != nil {
			continue
		}
		if g.Spec.NodeCount != 1 {
			resized++
			c.recorder.Publish(resizedOutOfBand(g, c.remind))
		}
		owner := nodegroup.OwnerClaim(g)
		if owner == nil {
			refused[nodegroup.ReasonNoOwnerClaim]++
			c.recorder.Publish(refusedWithoutOwner(g, c.remind))
			log.FromContext(ctx).V(1).Info("refusing to garbage-collect a nodegroup without an owner NodeClaim", "nodegroup", g.Name)
			continue
		}
		if _, err := nodegroup.ClaimOf(g); err != nil {
			// A copy keeps its owner reference too: it is not ours to write, and what
			// Kubernetes' garbage collector does with it is its maker's business.
			c.refuse(ctx, g, err, refused)
			continue
		}
		c.migrate(ctx, g, owner)
		if _, ok := live[string(owner.UID)]; ok || c.clock.Since(g.CreationTimestamp.Time) < c.grace {
			continue
		}
		if err := c.reap(ctx, g, refused); err != nil {
			log.FromContext(ctx).Error(err, "reaping orphaned nodegroup", "nodegroup", g.Name)
		}
	}
	for reason, n := range refused {
		garbageRefused.WithLabelValues(reason).Set(float64(n))
	}
	outOfBand.Set(float64(resized))
	for _, nc := range claims.Items {
		c.fastFail(ctx, &nc, existing)
	}
	return nil
}

// migrate moves a group's claim from an owner reference to the claim UID annotation once
// nodegroup.MigrateOwner proves, on uncached reads, that the group is its claim's.
func (c *Controller) migrate(ctx context.Context, g *ngv1.NodeGroup, owner *nodegroup.Owner) {
	migrated, err := nodegroup.MigrateOwner(ctx, c.kube, c.api, g)
	switch {
	case errors.Is(err, nodegroup.ErrNotOwned):
		// Its claim is gone (reap judges it below, with its own proof) or it names two claims:
		// nothing is written to a group not proven ours.
		log.FromContext(ctx).V(1).Info("not moving the ownership of a nodegroup not proven ours", "nodegroup", g.Name,
			"reason", nodegroup.NotOwnedReason(err), "why", err.Error())
	case apierrors.IsConflict(err):
		log.FromContext(ctx).V(1).Info("nodegroup changed after its proof, moving its ownership next pass", "nodegroup", g.Name)
	case err != nil:
		log.FromContext(ctx).Error(err, "migrating nodegroup ownership", "nodegroup", g.Name)
	case migrated:
		log.FromContext(ctx).Info("moved nodegroup ownership from an owner reference to the claim UID annotation",
			"nodegroup", g.Name, "nodeclaim", owner.Name)
	}
}

// refuse reports a group that looks managed but is not proven ours, and counts it by reason.
func (c *Controller) refuse(ctx context.Context, g *ngv1.NodeGroup, why error, refused map[string]int) {
	reason := nodegroup.NotOwnedReason(why)
	refused[reason]++
	c.recorder.Publish(refusedNotOwned(g, reason, why, c.remind))
	log.FromContext(ctx).V(1).Info("refusing to garbage-collect a nodegroup not proven ours", "nodegroup", g.Name, "reason", reason, "why", why.Error())
}

// reap deletes a group whose owner claim is gone, once ConfirmOrphan proves it on uncached
// reads, and only the object it proved it on: the delete is conditional on its UID and
// resourceVersion, so a group replaced or changed since the proof is not deleted.
func (c *Controller) reap(ctx context.Context, listed *ngv1.NodeGroup, refused map[string]int) error {
	g, owner, err := nodegroup.ConfirmOrphan(ctx, c.api, listed)
	switch {
	case errors.Is(err, nodegroup.ErrNotOwned):
		c.refuse(ctx, listed, err, refused)
		return nil
	case errors.Is(err, nodegroup.ErrNotOrphaned):
		log.FromContext(ctx).V(1).Info("not reaping nodegroup", "nodegroup", listed.Name, "why", err.Error())
		return nil
	case err != nil:
		return err
	}
	if err := c.kube.Delete(ctx, g, client.Preconditions{UID: &g.UID, ResourceVersion: &g.ResourceVersion}); err != nil {
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(1).Info("nodegroup changed after its proof, judging it again next pass", "nodegroup", g.Name)
			return nil
		}
		return client.IgnoreNotFound(fmt.Errorf("deleting nodegroup %q: %w", g.Name, err))
	}
	garbageCollected.Inc()
	c.recorder.Publish(reaped(g, owner.Name))
	log.FromContext(ctx).Info("garbage-collected orphaned nodegroup", "nodegroup", g.Name, "nodeclaim", owner.Name)
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
	cloudprovider.Vanished.WithLabelValues(cloudprovider.StageRegistration).Inc()
	c.recorder.Publish(vanishedBeforeRegistration(nc, name))
	log.FromContext(ctx).Info("nodegroup vanished before registration, deleting its nodeclaim", "nodegroup", name, "nodeclaim", nc.Name)
	if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		log.FromContext(ctx).Error(err, "deleting nodeclaim of vanished nodegroup", "nodeclaim", nc.Name)
	}
}
