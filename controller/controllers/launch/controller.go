// Package launch follows every launched NodeGroup until its NodeClaim registers and the group
// is Synced. Create returns on the operator's decision (about 1 s after creation), so whatever
// the operator publishes later would otherwise only be seen by Karpenter's 15-minute
// registration timeout:
//   - a refusal published after launch (QuotaExceeded at any time, or an unknown
//     ReconcileFailed reason on a group the operator never accepted) fails the launch now: the
//     NodeClaim is deleted, so core plans again at once, and the refusal is recorded as Create
//     records one (quota memory, flavors offered as unavailable, event, metric, group deleted);
//   - a transient failure (UpstreamError, or an unknown reason on an accepted group) is
//     surfaced (event, metric) and nothing is deleted for it: the operator retries on its own;
//   - a launch whose group still has no node once every live launch had one is given up,
//     whatever the group's status says: the NodeClaim is deleted, so core plans again now and
//     deletes the group (event, metric), instead of at its registration timeout (see "Giving
//     up" below);
//   - a group still not Synced overdueAfter after its creation is surfaced (gauge, event) and
//     nothing is deleted for that: one group took 6 min 30 s to sync on a live cluster and
//     still worked, and a node that joined may already run pods.
//
// # Giving up
//
// The rule: a launch whose group has no Node 3 min 30 s after the group's creation is given up,
// whatever the group's status says, so that the pod of a dead launch runs on its replacement
// within 5 minutes of the dead launch's creation. From the platform's timings (cke-platform.md
// §6):
//
//   - The join bound: a group's node joins and registers 26–60 s after the group's creation
//     usually, 185 s at worst, on every live launch. That is the earliest a launch may be given
//     up: before it, a launch that would have worked is thrown away, and with it its quota
//     reservation for minutes (§5). Synced once came only after 6 min 30 s, but that group's
//     node had joined long before: the outlier says how long Synced can take, not a node, and
//     a group with a node is never given up here.
//   - The replacement's path, from the give-up to its pod Running: core's batch window (1 s
//     idle, 10 s at most), the decision Create returns on (~1 s), the new node's join (26–60 s
//     usually), its registration (< 5 s) and the pod's start; §6 has 40–50 s typical from
//     pending to Running. 90 s covers a replacement whose node joins within the usual 60 s.
//   - So giveUpAfter (settings.LaunchGiveUpAfter) is 5 min less those 90 s: 3 min 30 s, the
//     join bound plus 25 s. The 25 s are for an operator still at work: a retry that goes
//     through late (an UpstreamError of a few seconds) starts the VM that much later.
//   - stoppedGiveUpAfter (settings.StoppedLaunchGiveUpAfter, 3 min 10 s) replaces it when the
//     operator stopped working on the group: ReconcileInProgress=False with a ReconcileFailed
//     reason it is not known to retry. Nothing more is started then, and a VM already started
//     joins within the join bound: 5 s more covers the creation time's whole seconds and the
//     node check.
//
// Whatever the status: Creating, an UpstreamError the operator retries (the one seen lasted an
// hour, four times core's timeout), an unknown failure, Synced, or no status at all. A node
// that will ever come has come by then on every live launch, and the operator's word that it
// is still working buys nothing past the join bound. A replacement whose own node is as slow
// as the join bound runs its pod later than 5 minutes, about 7; only giving up before that
// bound could prevent it, at the price of launches that work. Core's registration timeout
// alone would have failed the dead launch at 15 minutes, and only then started its
// replacement.
//
// "No node" is read from Node objects, uncached: <group>-node0, or any node labelled with the
// group (one resized by hand also has node1…), or the node the claim already names. A Node is
// what pods run on and what core registers; its existence, Synced or not, vetoes the give-up
// for good. status.nodeCount is not used: it is the operator's count, written on its own
// schedule and not documented to mean a kubelet joined; a VM it counts that never joined is
// exactly a launch to give up.
//
// Deleting a NodeClaim is destructive, so it follows the garbage collector's rules: the claim's UID
// on the group proves the group was launched for that claim, an uncached read confirms both the
// group's state and the claim, and the delete carries the claim's UID and resourceVersion as
// preconditions, so a claim that registered (or changed at all) meanwhile is never deleted.
package launch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/internal/finished"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// Provider is what the follower needs from the cloud provider: Create's bookkeeping of a
// refusal and of a transient failure, so a late one is recorded exactly like an early one.
type Provider interface {
	RecordRefusal(ctx context.Context, claim *karpv1.NodeClaim, group *ngv1.NodeGroup, verdict nodegroup.Verdict)
	RecordTransient(claim *karpv1.NodeClaim, group *ngv1.NodeGroup, verdict nodegroup.Verdict)
}

// Timings are the follower's thresholds, each counted from the group's creation (the package
// documentation says how the defaults follow from the platform's timings).
type Timings struct {
	// OverdueAfter: a group still short of Synced is reported (settings.SyncOverdueAfter).
	OverdueAfter time.Duration
	// GiveUpAfter: a launch whose group has no node is given up (settings.LaunchGiveUpAfter).
	GiveUpAfter time.Duration
	// StoppedGiveUpAfter replaces GiveUpAfter, when shorter, for a group the operator stopped
	// working on (settings.StoppedLaunchGiveUpAfter).
	StoppedGiveUpAfter time.Duration
}

// Give-up rules, the rule label of the give-up metric.
const (
	ruleOperatorStopped = "operator_stopped"
	ruleNoNode          = "no_node"
)

// Workers is how many launches are followed at once.
const Workers = 16

// Controller is the launch follower.
type Controller struct {
	kube     client.Client
	api      client.Reader
	provider Provider
	recorder events.Recorder
	clock    clock.Clock
	timings  Timings

	mu sync.Mutex
	// followed is what the follower remembers of each launch it follows, by NodeClaim name.
	followed map[string]*follow
	// ended holds the claims whose launch ended (registered on a built group): their later
	// changes, and their groups', are not reconciled again.
	ended finished.Set
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

// New builds the follower. api must be an uncached reader: the destructive paths confirm
// what they saw with it.
func New(kube client.Client, api client.Reader, provider Provider, recorder events.Recorder, clk clock.Clock, timings Timings) *Controller {
	return &Controller{kube: kube, api: api, provider: provider, recorder: recorder, clock: clk, timings: timings,
		followed: map[string]*follow{}}
}

// Register implements operatorpkg's controller.Controller: NodeClaims of a CleverNodeClass,
// and the NodeGroups that own-reference them, mapped to their claim.
func (c *Controller) Register(_ context.Context, m manager.Manager) error {
	return ctrl.NewControllerManagedBy(m).
		Named("clevercloud.launch").
		// A deleted claim is reconciled: the follower forgets what it remembered of it.
		For(&karpv1.NodeClaim{}, builder.WithPredicates(c.ended.Predicate(ours, true))).
		Watches(&ngv1.NodeGroup{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			g := o.(*ngv1.NodeGroup)
			owner := nodegroup.OwnerClaim(g)
			if !nodegroup.IsManaged(g) || owner == nil || c.ended.Has(owner.UID) {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: owner.Name}}}
		})).
		// One worker queued a 600-node scale-out's status changes behind one another (core's
		// performance suite): the destructive paths' uncached reads take an apiserver round trip.
		// Launches are independent (a key is never reconciled twice at once) and what the
		// follower remembers is under mu.
		WithOptions(controller.Options{MaxConcurrentReconciles: Workers}).
		Complete(c)
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	claim := &karpv1.NodeClaim{}
	// From the cache: a launch is reconciled on each of its claim's and its group's status
	// writes, and these reads were a tenth of the apiserver's requests during core's performance
	// suite. Nothing is deleted on what this read shows: failLaunch and giveUp confirm the
	// claim and the group by uncached reads, and delete with their preconditions.
	if err := c.kube.Get(ctx, req.NamespacedName, claim); err != nil {
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
		c.ended.Add(claim.UID)
		return reconcile.Result{}, nil
	}
	c.surfaceTransient(ctx, claim, group, verdict)
	if registered {
		// Its node joined and may run pods: never given up, only reported if it never syncs.
		return c.checkOverdue(ctx, claim, group, verdict), nil
	}
	after, _ := c.giveUpAfter(group, verdict)
	if left := after - c.clock.Since(group.CreationTimestamp.Time); left > 0 {
		return sooner(c.checkOverdue(ctx, claim, group, verdict), left), nil
	}
	return c.giveUp(ctx, claim, group)
}

// giveUpAfter is how long after its creation a launch whose group has no node is given up,
// and the rule that says so.
func (c *Controller) giveUpAfter(group *ngv1.NodeGroup, v nodegroup.Verdict) (time.Duration, string) {
	if stopped(group, v) && c.timings.StoppedGiveUpAfter < c.timings.GiveUpAfter {
		return c.timings.StoppedGiveUpAfter, ruleOperatorStopped
	}
	return c.timings.GiveUpAfter, ruleNoNode
}

// stopped says the operator stopped working on the group: ReconcileInProgress turned False on
// a failure it is not known to retry. UpstreamError is retried for up to an hour, so a group
// showing it is still in progress whatever its conditions say.
func stopped(group *ngv1.NodeGroup, v nodegroup.Verdict) bool {
	if v.Outcome != nodegroup.Transient || v.Reason == ngv1.ReasonUpstreamError {
		return false
	}
	p := group.Condition(ngv1.ConditionReconcileInProgress)
	return p != nil && p.Status == metav1.ConditionFalse
}

// sooner shortens a result's requeue to left when that comes first.
func sooner(res reconcile.Result, left time.Duration) reconcile.Result {
	if res.RequeueAfter == 0 || left < res.RequeueAfter {
		res.RequeueAfter = left
	}
	return res
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
	if age < c.timings.OverdueAfter {
		return reconcile.Result{RequeueAfter: c.timings.OverdueAfter - age}
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
	claim, res, err := c.deleteClaim(ctx, cached, fresh)
	if err != nil {
		if errors.Is(err, nodegroup.ErrNotOwned) {
			log.FromContext(ctx).Info("not failing the launch of a refused nodegroup whose ownership is not proven", "why", err.Error())
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("failing the launch of refused nodegroup %q: %w", fresh.Name, err)
	}
	if claim == nil {
		return res, nil
	}
	lateRefusals.WithLabelValues(verdict.Reason).Inc()
	c.recorder.Publish(refusedAfterLaunch(claim, fresh.Name, verdict))
	log.FromContext(ctx).Info("nodegroup refused after launch; deleted its nodeclaim so Karpenter plans again now",
		"reason", verdict.Reason, "message", verdict.Message)
	c.provider.RecordRefusal(ctx, claim, fresh, verdict)
	c.forget(cached.Name)
	return reconcile.Result{}, nil
}

// giveUp deletes the NodeClaim of a launch whose group has no node past its give-up time, once
// uncached reads confirm the group's state, that no node of it is in the cluster, and the
// claim. A group with a node is only checked for being overdue.
func (c *Controller) giveUp(ctx context.Context, cached *karpv1.NodeClaim, group *ngv1.NodeGroup) (reconcile.Result, error) {
	fresh := &ngv1.NodeGroup{}
	if err := c.api.Get(ctx, client.ObjectKeyFromObject(group), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil // gone meanwhile: garbage collection fast-fails the claim
		}
		return reconcile.Result{}, fmt.Errorf("confirming the state of nodegroup %q: %w", group.Name, err)
	}
	if fresh.UID != group.UID || fresh.DeletionTimestamp != nil {
		return reconcile.Result{}, nil // the cache was stale; the next event judges again
	}
	verdict := c.judge(fresh)
	if verdict.Outcome.Refusal() {
		return reconcile.Result{Requeue: true}, nil // the next pass fails it as a refusal, booked as one
	}
	after, rule := c.giveUpAfter(fresh, verdict)
	age := c.clock.Since(fresh.CreationTimestamp.Time)
	if age < after {
		// The cache showed a stopped operator that has since resumed: the longer time holds.
		return sooner(c.checkOverdue(ctx, cached, fresh, verdict), after-age), nil
	}
	// Nodes before the claim: the claim is read last, so that the delete's preconditions
	// cover as much as they can of the time since the node check.
	node, err := c.node(ctx, cached, fresh)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node != "" {
		log.FromContext(ctx).V(1).Info("launch past its give-up time has a node; not giving it up", "node", node, "age", age.Truncate(time.Second).String())
		return c.checkOverdue(ctx, cached, fresh, verdict), nil
	}
	claim, res, err := c.deleteClaim(ctx, cached, fresh)
	if err != nil {
		if errors.Is(err, nodegroup.ErrNotOwned) {
			log.FromContext(ctx).Info("not giving up the launch of a nodegroup whose ownership is not proven", "why", err.Error())
			return c.checkOverdue(ctx, cached, fresh, verdict), nil
		}
		return reconcile.Result{}, fmt.Errorf("giving up the launch of nodegroup %q: %w", fresh.Name, err)
	}
	if claim == nil {
		return res, nil
	}
	reason := verdict.Reason
	if reason == "" {
		reason = verdict.Outcome.String()
	}
	launchesGivenUp.WithLabelValues(rule, reason).Inc()
	c.recorder.Publish(launchGivenUp(claim, fresh, age.Truncate(time.Second), rule, verdict))
	log.FromContext(ctx).Info("launched nodegroup has no node past its give-up time; deleted its nodeclaim so Karpenter plans again now",
		"age", age.Truncate(time.Second).String(), "rule", rule, "phase", fresh.Status.Phase, "outcome", verdict.Outcome.String(),
		"reason", verdict.Reason, "message", verdict.Message, "statusNodeCount", fresh.Status.NodeCount)
	c.forget(cached.Name)
	return reconcile.Result{}, nil
}

// node names a node of the group that is in the cluster, read uncached, or returns "": the node
// the claim already names, <group>-node0, or any node labelled with the group (a group resized
// by hand also has node1…). status.nodeCount is not asked: see the package documentation.
func (c *Controller) node(ctx context.Context, claim *karpv1.NodeClaim, group *ngv1.NodeGroup) (string, error) {
	if claim.Status.NodeName != "" {
		return claim.Status.NodeName, nil
	}
	name := ngv1.NodeName(group.Name, 0)
	if err := c.api.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); err == nil {
		return name, nil
	} else if !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("looking for node %q of nodegroup %q: %w", name, group.Name, err)
	}
	nodes := &corev1.NodeList{}
	if err := c.api.List(ctx, nodes, client.MatchingLabels{ngv1.LabelNodeGroup: group.Name}); err != nil {
		return "", fmt.Errorf("listing the nodes of nodegroup %q: %w", group.Name, err)
	}
	if len(nodes.Items) > 0 {
		return nodes.Items[0].Name, nil
	}
	return "", nil
}

// deleteClaim deletes the NodeClaim a group was launched for, once the ownership proof holds
// (the claim UID on the group, the group's name and label, and an uncached read finding the
// live claim with that UID) and that read shows the claim followed, still unregistered and
// not going away. It returns the deleted claim; nil with no error when it deleted nothing;
// an error wrapping nodegroup.ErrNotOwned when the proof fails.
func (c *Controller) deleteClaim(ctx context.Context, cached *karpv1.NodeClaim, group *ngv1.NodeGroup) (*karpv1.NodeClaim, reconcile.Result, error) {
	claim, err := nodegroup.ConfirmOwner(ctx, c.api, group)
	if err != nil {
		return nil, reconcile.Result{}, err
	}
	if claim.UID != cached.UID || !claim.DeletionTimestamp.IsZero() || claim.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue() {
		return nil, reconcile.Result{}, nil
	}
	// The preconditions make the apiserver refuse the delete if the claim changed since the
	// read above, e.g. because its node registered.
	if err := c.kube.Delete(ctx, claim, client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion}); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, reconcile.Result{}, nil
		case apierrors.IsConflict(err):
			log.FromContext(ctx).V(1).Info("nodeclaim changed while deleting it; judging again")
			return nil, reconcile.Result{Requeue: true}, nil
		}
		return nil, reconcile.Result{}, fmt.Errorf("deleting nodeclaim %q: %w", claim.Name, err)
	}
	return claim, reconcile.Result{}, nil
}

// ours says the claim is of a CleverNodeClass.
func ours(o client.Object) bool {
	_, ours := v1alpha1.NodeClassName(o.(*karpv1.NodeClaim))
	return ours
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
