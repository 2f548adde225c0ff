// Package launch follows every launched NodeGroup until its NodeClaim registers and the group
// is Synced. Create returns on the operator's decision (about 1 s after creation), so whatever
// the operator publishes later would otherwise only be seen by Karpenter's 15-minute
// registration timeout:
//   - a refusal published after launch (QuotaExceeded at any time, or an unknown
//     ReconcileFailed reason on a group the operator never accepted) fails the launch now: the
//     NodeClaim is deleted, so core plans again at once, and the refusal is recorded as Create
//     records one (quota memory, flavors offered as unavailable, event, metric, group deleted);
//   - a transient failure (UpstreamError, or an unknown reason on an accepted group) is
//     surfaced (event, metric) and nothing is deleted: the operator retries on its own;
//   - a group still not Synced overdueAfter after its creation is surfaced (gauge, event) and
//     nothing is deleted: one group took 6 min 30 s to sync on a live cluster and still worked.
//
// Deleting a NodeClaim is destructive, so it follows the garbage collector's rules: the claim's UID
// on the group proves the group was launched for that claim, an uncached read confirms both the
// refusal and the claim, and the delete carries the claim's UID and resourceVersion as
// preconditions, so a claim that registered (or changed at all) meanwhile is never deleted.
package launch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// Provider is what the follower needs from the cloud provider: Create's bookkeeping of a
// refusal and of a transient failure, so a late one is recorded exactly like an early one.
type Provider interface {
	RecordRefusal(ctx context.Context, claim *karpv1.NodeClaim, group *ngv1.NodeGroup, verdict nodegroup.Verdict)
	RecordTransient(claim *karpv1.NodeClaim, group *ngv1.NodeGroup, verdict nodegroup.Verdict)
}

// Controller is the launch follower.
type Controller struct {
	kube         client.Client
	api          client.Reader
	provider     Provider
	recorder     events.Recorder
	clock        clock.Clock
	overdueAfter time.Duration

	mu sync.Mutex
	// followed is what the follower remembers of each launch it follows, by NodeClaim name.
	followed map[string]*follow
}

// follow is the memory of one launch.
type follow struct {
	group types.UID
	// accepted: the operator was seen accepting the group; an unknown failure is then
	// transient even if the status no longer shows the acceptance.
	accepted bool
	// transient is the transient failure reason last surfaced, "" when none is shown.
	transient string
	// overdue: surfaced as not Synced in time.
	overdue bool
}

// New builds the follower. api must be an uncached reader; overdueAfter is how long after its
// creation a group may stay short of Synced before it is surfaced (settings.SyncOverdueAfter,
// which says why 10 minutes by default).
func New(kube client.Client, api client.Reader, provider Provider, recorder events.Recorder, clk clock.Clock, overdueAfter time.Duration) *Controller {
	return &Controller{kube: kube, api: api, provider: provider, recorder: recorder, clock: clk, overdueAfter: overdueAfter,
		followed: map[string]*follow{}}
}

// Register implements operatorpkg's controller.Controller: NodeClaims of a CleverNodeClass,
// and the NodeGroups that own-reference them, mapped to their claim.
func (c *Controller) Register(_ context.Context, m manager.Manager) error {
	return ctrl.NewControllerManagedBy(m).
		Named("clevercloud.launch").
		For(&karpv1.NodeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			_, ours := v1alpha1.NodeClassName(o.(*karpv1.NodeClaim))
			return ours
		}))).
		Watches(&ngv1.NodeGroup{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			g := o.(*ngv1.NodeGroup)
			owner := nodegroup.OwnerClaim(g)
			if !nodegroup.IsManaged(g) || owner == nil {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: owner.Name}}}
		})).
		Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	claim := &karpv1.NodeClaim{}
	// Read from the apiserver, not the informer cache: Karpenter core lists NodeClaims from the
	// cache without copying them and may update one in place while the cache deep-copies it for
	// us, which panicked this reconciler once under load (index out of range in
	// NodeClaimStatus.DeepCopyInto). A followed launch is short-lived; the extra GET is cheap.
	if err := c.api.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			c.forget(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting nodeclaim %q: %w", req.Name, err)
	}
	name := nodegroup.GroupName(claim.Status.ProviderID)
	if name == "" || !claim.DeletionTimestamp.IsZero() || !claim.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() {
		// Not launched yet (Create is still deciding, and handles what it sees) or going away.
		c.forget(claim.Name)
		return reconcile.Result{}, nil
	}
	group := &ngv1.NodeGroup{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, group); err != nil {
		if apierrors.IsNotFound(err) {
			// Vanished: garbage collection fast-fails the claim.
			c.forget(claim.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting nodegroup %q: %w", name, err)
	}
	if owner := nodegroup.OwnerClaim(group); owner == nil || owner.UID != claim.UID || group.Name != claim.Name || group.DeletionTimestamp != nil {
		c.forget(claim.Name) // not this claim's launch, or already going away
		return reconcile.Result{}, nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("nodeclaim", claim.Name, "nodegroup", group.Name))
	registered := claim.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue()

	verdict := c.judge(group)
	if verdict.Outcome.Refusal() {
		if !registered {
			return c.failLaunch(ctx, claim, group)
		}
		// A node that registered is Karpenter's to manage: never fail it from here.
		log.FromContext(ctx).V(1).Info("the operator reports a refusal on a group whose node registered; leaving it to Karpenter", "reason", verdict.Reason)
	}
	if registered && verdict.Synced {
		// Done: the node is Karpenter's and the group is built. Whatever the operator reports
		// later (a transient failure on a resize, say) is no longer a launch's business.
		c.forget(claim.Name)
		return reconcile.Result{}, nil
	}
	c.surfaceTransient(ctx, claim, group, verdict)
	return c.checkOverdue(ctx, claim, group, verdict), nil
}

// judge reads the group's status with what the follower saw of it before.
func (c *Controller) judge(group *ngv1.NodeGroup) nodegroup.Verdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.followLocked(group)
	v := nodegroup.JudgeAfter(group, f.accepted)
	f.accepted = v.Accepted
	return v
}

// followLocked returns the memory of the group's launch, fresh when the group is a new object
// of the same name. Groups are named after their claim (checked by Reconcile), so the name
// keys both.
func (c *Controller) followLocked(group *ngv1.NodeGroup) *follow {
	f := c.followed[group.Name]
	if f != nil && f.group == group.UID {
		return f
	}
	c.followed[group.Name] = &follow{group: group.UID}
	if f != nil && f.overdue {
		c.publishOverdueLocked()
	}
	return c.followed[group.Name]
}

// surfaceTransient reports a transient failure once per reason while it shows.
func (c *Controller) surfaceTransient(ctx context.Context, claim *karpv1.NodeClaim, group *ngv1.NodeGroup, v nodegroup.Verdict) {
	reason := ""
	if v.Outcome == nodegroup.Transient {
		reason = v.Reason
	}
	c.mu.Lock()
	f := c.followLocked(group)
	changed := f.transient != reason
	f.transient = reason
	c.mu.Unlock()
	if !changed || reason == "" {
		return
	}
	transientFailures.WithLabelValues(reason).Inc()
	c.provider.RecordTransient(claim, group, v)
	log.FromContext(ctx).Info("the node-group operator reports a transient failure on a launch; it retries on its own, nothing is deleted",
		"reason", v.Reason, "message", v.Message)
}

// checkOverdue surfaces a group not Synced overdueAfter after its creation, or asks to be
// woken when it would become so.
func (c *Controller) checkOverdue(ctx context.Context, claim *karpv1.NodeClaim, group *ngv1.NodeGroup, v nodegroup.Verdict) reconcile.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.followLocked(group)
	if v.Synced {
		if f.overdue {
			f.overdue = false
			c.publishOverdueLocked()
		}
		return reconcile.Result{} // the claim's registration brings us back
	}
	age := c.clock.Since(group.CreationTimestamp.Time)
	if age < c.overdueAfter {
		return reconcile.Result{RequeueAfter: c.overdueAfter - age}
	}
	if !f.overdue {
		f.overdue = true
		c.publishOverdueLocked()
		c.recorder.Publish(syncOverdue(claim, group, age.Truncate(time.Second)))
		log.FromContext(ctx).Info("launched nodegroup is still not Synced; surfacing it, deleting nothing",
			"age", age.Truncate(time.Second).String(), "phase", group.Status.Phase, "outcome", v.Outcome.String())
	}
	return reconcile.Result{} // its next status write or the claim's registration brings us back
}

// failLaunch deletes the NodeClaim of a group refused after launch, once an uncached read
// confirms the refusal and the claim, and records the refusal.
func (c *Controller) failLaunch(ctx context.Context, cached *karpv1.NodeClaim, group *ngv1.NodeGroup) (reconcile.Result, error) {
	fresh := &ngv1.NodeGroup{}
	if err := c.api.Get(ctx, client.ObjectKeyFromObject(group), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil // gone meanwhile: garbage collection fast-fails the claim
		}
		return reconcile.Result{}, fmt.Errorf("confirming the refusal of nodegroup %q: %w", group.Name, err)
	}
	verdict := c.judge(fresh)
	if fresh.UID != group.UID || !verdict.Outcome.Refusal() {
		return reconcile.Result{}, nil // the cache was stale; the next event judges again
	}
	// Ownership proof and an uncached read of the claim: the claim UID on the group, the
	// group's name and label, and the live claim with that UID.
	claim, err := nodegroup.ConfirmOwner(ctx, c.api, fresh)
	if err != nil {
		if errors.Is(err, nodegroup.ErrNotOwned) {
			log.FromContext(ctx).Info("not failing the launch of a refused nodegroup whose ownership is not proven", "why", err.Error())
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if claim.UID != cached.UID || !claim.DeletionTimestamp.IsZero() || claim.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue() {
		return reconcile.Result{}, nil
	}
	// The preconditions make the apiserver refuse the delete if the claim changed since the
	// read above, e.g. because its node registered.
	if err := c.kube.Delete(ctx, claim, client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion}); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return reconcile.Result{}, nil
		case apierrors.IsConflict(err):
			log.FromContext(ctx).V(1).Info("nodeclaim changed while failing its launch; judging again")
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, fmt.Errorf("deleting nodeclaim %q of refused nodegroup %q: %w", claim.Name, fresh.Name, err)
	}
	lateRefusals.WithLabelValues(verdict.Reason).Inc()
	c.recorder.Publish(refusedAfterLaunch(claim, fresh.Name, verdict))
	log.FromContext(ctx).Info("nodegroup refused after launch; deleted its nodeclaim so Karpenter plans again now",
		"reason", verdict.Reason, "message", verdict.Message)
	c.provider.RecordRefusal(ctx, claim, fresh, verdict)
	c.forget(cached.Name)
	return reconcile.Result{}, nil
}

// forget drops what the follower remembers of a launch.
func (c *Controller) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.followed[name]
	if !ok {
		return
	}
	delete(c.followed, name)
	if f.overdue {
		c.publishOverdueLocked()
	}
}

func (c *Controller) publishOverdueLocked() { launchesOverdue.Set(float64(c.overdueLocked())) }

// overdueLocked counts the followed launches currently overdue.
func (c *Controller) overdueLocked() int {
	n := 0
	for _, f := range c.followed {
		if f.overdue {
			n++
		}
	}
	return n
}
