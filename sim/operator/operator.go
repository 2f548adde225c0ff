// Package operator is the simulated Clever Cloud node-group operator: a controller that
// turns NodeGroup objects into Node objects the way CKE does, with its quota, its delays and,
// on demand, its failures.
package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
)

// Finalizer is the finalizer the operator holds on every NodeGroup until its VMs are gone.
const Finalizer = "api.clever-cloud.com/nodegroup-operator"

// FaultAnnotation injects faults into one group: a comma-separated list of Fault values.
const FaultAnnotation = "sim.clever-cloud.com/fault"

// Fault is a failure the platform has shown in the field.
type Fault string

const (
	// FaultNeverAccept leaves the group unjudged forever (ReconcileInProgress=True).
	FaultNeverAccept Fault = "never-accept"
	// FaultVanishAfterAccept deletes the group upstream VanishDelay after acceptance, with
	// no event: the object and its nodes disappear.
	FaultVanishAfterAccept Fault = "vanish-after-accept"
	// FaultNodeNeverReady boots the nodes but their kubelet never reports Ready.
	FaultNodeNeverReady Fault = "node-never-ready"
	// FaultSlowBoot boots the nodes after SlowBootDelay instead of BootDelay.
	FaultSlowBoot Fault = "slow-boot"
)

// Options configure the operator. Zero durations mean "at once".
type Options struct {
	// QuotaCPU and QuotaRAMGB are the organisation quota. Zero means CKE's default, 40 / 40.
	QuotaCPU   int64
	QuotaRAMGB int64
	// AcceptDelay is the time from a group's creation to its verdict (accepted or rejected).
	AcceptDelay time.Duration
	// BootDelay is the time from acceptance (or a scale-up) to a Node joining.
	BootDelay time.Duration
	// SlowBootDelay replaces BootDelay for groups with FaultSlowBoot.
	SlowBootDelay time.Duration
	// TeardownDelay is the time from a delete (or scale-down) to the Node being deleted.
	TeardownDelay time.Duration
	// VanishDelay is the time from acceptance to the upstream deletion of FaultVanishAfterAccept.
	VanishDelay time.Duration
	// Faults apply to every group that has no FaultAnnotation.
	Faults []Fault
	// QuotaBatchWindow > 0 makes the quota engine judge creations that reach their verdict
	// within this window together: if their sum overflows the quota, all are rejected.
	QuotaBatchWindow time.Duration
	// LeakedReservationTTL > 0 makes a rejected group's reservation outlive the group by
	// this long, as bursts of create → reject → delete did upstream.
	LeakedReservationTTL time.Duration
	Log                  logr.Logger
}

// Operator reconciles NodeGroups into Nodes.
type Operator struct {
	client.Client
	log logr.Logger

	mu     sync.Mutex
	opts   Options
	groups map[types.UID]*groupState
	// ledger holds what each accepted group holds of the quota, by group name.
	ledger  map[string]usage
	leaks   []leak
	batch   *batch
	batches map[string]*batch // by group name, until the member has applied its verdict
}

type groupState struct {
	name       string
	firstSeen  time.Time
	accepted   bool
	acceptedAt time.Time
	// granted is how many nodes the quota engine granted.
	granted int32
	// judgedGeneration stops a rejected spec from being judged again until it changes.
	judgedGeneration int64
	rejected         usage
	bootAt           map[int]time.Time
	removeAt         map[int]time.Time
	teardownAt       time.Time
}

// New returns an operator; register it with SetupWithManager.
func New(c client.Client, opts Options) *Operator {
	if opts.QuotaCPU == 0 {
		opts.QuotaCPU = 40
	}
	if opts.QuotaRAMGB == 0 {
		opts.QuotaRAMGB = 40
	}
	return &Operator{
		Client:  c,
		log:     opts.Log,
		opts:    opts,
		groups:  map[types.UID]*groupState{},
		ledger:  map[string]usage{},
		batches: map[string]*batch{},
	}
}

// Options returns the options in force.
func (o *Operator) Options() Options {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.opts
}

// Configure changes options at run time (quota, delays, faults, quirks), e.g. between the
// scenarios of a test suite. Groups already judged keep their verdict.
func (o *Operator) Configure(mutate func(*Options)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	mutate(&o.opts)
	if o.opts.QuotaCPU == 0 {
		o.opts.QuotaCPU = 40
	}
	if o.opts.QuotaRAMGB == 0 {
		o.opts.QuotaRAMGB = 40
	}
}

// ResetQuotaEngine drops leaked reservations and any open batch.
func (o *Operator) ResetQuotaEngine() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.leaks, o.batch = nil, nil
}

// SetupWithManager registers the controller: NodeGroups, and Nodes mapped to their group
// through the clever-cloud.com/nodegroup label.
func (o *Operator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("simcke-nodegroup-operator").
		For(&ngv1.NodeGroup{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
			if g := obj.GetLabels()[ngv1.LabelNodeGroup]; g != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: g}}}
			}
			return nil
		})).
		// Several simulated clusters may live in one test process.
		WithOptions(controller.Options{MaxConcurrentReconciles: 16, SkipNameValidation: ptr.To(true)}).
		Complete(o)
}

// Reconcile moves one NodeGroup one step along its life.
func (o *Operator) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := o.log.WithValues("nodegroup", req.Name)
	opts := o.Options()
	g := &ngv1.NodeGroup{}
	if err := o.Get(ctx, req.NamespacedName, g); err != nil {
		if apierrors.IsNotFound(err) {
			o.forget(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading NodeGroup %q: %w", req.Name, err)
	}
	if !g.DeletionTimestamp.IsZero() {
		return o.teardown(ctx, log, g, opts)
	}
	if !controllerutil.ContainsFinalizer(g, Finalizer) {
		controllerutil.AddFinalizer(g, Finalizer)
		if err := o.Update(ctx, g); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer to NodeGroup %q: %w", g.Name, err)
		}
	}
	now := time.Now()
	st := o.state(g, now)
	faults := faultsOf(g, opts.Faults)

	if !st.accepted {
		if slices.Contains(faults, FaultNeverAccept) {
			return reconcile.Result{}, o.patchStatus(ctx, g, func(s *ngv1.NodeGroupStatus) {
				setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, "Provisioning", "Waiting for the node group to be created upstream")
			})
		}
		if wait := st.firstSeen.Add(opts.AcceptDelay).Sub(now); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, o.patchStatus(ctx, g, func(s *ngv1.NodeGroupStatus) {
				setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, "Provisioning", "Waiting for the node group to be created upstream")
			})
		}
	} else if slices.Contains(faults, FaultVanishAfterAccept) {
		if wait := st.acceptedAt.Add(opts.VanishDelay).Sub(now); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		return reconcile.Result{}, o.vanish(ctx, log, g)
	}

	// A spec is judged once per generation, except that giving nodes back always succeeds.
	judge := st.judgedGeneration != g.Generation && (!st.accepted || g.Spec.NodeCount != st.granted)
	if st.accepted && g.Spec.NodeCount < st.granted {
		judge = true
	}
	if judge {
		wait, err := o.judge(ctx, log, g, st, now)
		if err != nil || wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, err
		}
		if st.accepted && slices.Contains(faults, FaultVanishAfterAccept) {
			return reconcile.Result{RequeueAfter: opts.VanishDelay}, nil
		}
	}
	if !st.accepted {
		return reconcile.Result{}, nil
	}
	return o.converge(ctx, log, g, st, faults, opts, now)
}

// judge asks the quota engine for spec.nodeCount nodes and records its verdict in status.
// It returns a wait when a batch is still open.
func (o *Operator) judge(ctx context.Context, log logr.Logger, g *ngv1.NodeGroup, st *groupState, now time.Time) (time.Duration, error) {
	flavor, ok := cke.LookupFlavor(g.Spec.Flavor)
	if !ok {
		st.judgedGeneration = g.Generation
		return 0, o.patchStatus(ctx, g, func(s *ngv1.NodeGroupStatus) {
			setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionFalse, "Failed", "")
			setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, "InvalidFlavor", fmt.Sprintf("Unknown flavor %q", g.Spec.Flavor))
			setCondition(s, g, ngv1.ConditionReady, metav1.ConditionFalse, "InvalidFlavor", "")
		})
	}
	want := usage{CPU: flavor.CPU, GB: flavor.NominalGB}.times(int64(g.Spec.NodeCount))
	base, err := o.baseUsage(ctx)
	if err != nil {
		return 0, err
	}

	o.mu.Lock()
	opts := o.opts
	limit := usage{CPU: opts.QuotaCPU, GB: opts.QuotaRAMGB}
	var accepted bool
	var message string
	if !st.accepted && opts.QuotaBatchWindow > 0 {
		b := o.batches[g.Name]
		if b == nil {
			if o.batch == nil || !now.Before(o.batch.closesAt) {
				o.batch = &batch{closesAt: now.Add(opts.QuotaBatchWindow), members: map[string]usage{}}
			}
			b = o.batch
			b.members[g.Name] = want
			o.batches[g.Name] = b
		}
		if wait := b.closesAt.Sub(now); wait > 0 {
			o.mu.Unlock()
			return wait, nil
		}
		if !b.decided {
			total := base.add(o.heldLocked(now, ""))
			for _, u := range b.members {
				total = total.add(u)
			}
			b.decided, b.accepted = true, total.fits(limit)
			if !b.accepted {
				b.message = quotaMessage(limit, total)
			}
			log.Info("quota batch judged", "members", len(b.members), "accepted", b.accepted)
		}
		accepted, message = b.accepted, b.message
		delete(o.batches, g.Name)
	} else {
		total := base.add(o.heldLocked(now, g.Name)).add(want)
		accepted = total.fits(limit)
		if !accepted {
			message = quotaMessage(limit, total)
		}
	}
	st.judgedGeneration = g.Generation
	if accepted {
		o.ledger[g.Name] = want
		if !st.accepted {
			st.accepted, st.acceptedAt = true, now
		}
		st.granted = g.Spec.NodeCount
	} else {
		st.rejected = want
	}
	o.mu.Unlock()

	if !accepted {
		log.Info("rejected by quota", "message", message)
		return 0, o.patchStatus(ctx, g, func(s *ngv1.NodeGroupStatus) {
			s.Phase = ngv1.PhaseQuotaExceeded
			s.TargetNodeCount = g.Spec.NodeCount
			setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionFalse, ngv1.ReasonQuotaExceeded, "")
			setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, ngv1.ReasonQuotaExceeded, message)
			if meta.FindStatusCondition(s.Conditions, ngv1.ConditionReady) == nil {
				setCondition(s, g, ngv1.ConditionReady, metav1.ConditionFalse, ngv1.ReasonQuotaExceeded, message)
			}
		})
	}
	log.Info("accepted", "nodeCount", g.Spec.NodeCount)
	return 0, o.patchStatus(ctx, g, func(s *ngv1.NodeGroupStatus) {
		s.Phase = ngv1.PhaseSynced
		s.TargetNodeCount = g.Spec.NodeCount
		s.UpstreamID = "nodegroup_" + string(g.UID)
		s.Labels = g.Spec.Labels
		s.Taints = g.Spec.Taints
		setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionFalse, "Synced", "")
		setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionFalse, "Synced", "")
		setCondition(s, g, ngv1.ConditionReady, metav1.ConditionTrue, "Synced", "Node group is synced")
	})
}

// converge boots and removes Nodes until the group has its granted count.
func (o *Operator) converge(ctx context.Context, log logr.Logger, g *ngv1.NodeGroup, st *groupState, faults []Fault, opts Options, now time.Time) (reconcile.Result, error) {
	nodes, err := o.nodesOf(ctx, g.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	existing := map[int]*corev1.Node{}
	for i := range nodes {
		if idx, ok := nodeIndex(g.Name, nodes[i].Name); ok {
			existing[idx] = &nodes[i]
		}
	}
	bootDelay := opts.BootDelay
	if slices.Contains(faults, FaultSlowBoot) {
		bootDelay = opts.SlowBootDelay
	}
	var next time.Duration
	later := func(d time.Duration) {
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	flavor := cke.MustFlavor(g.Spec.Flavor)
	for i := 0; i < int(st.granted); i++ {
		delete(st.removeAt, i)
		if existing[i] != nil {
			continue
		}
		at, ok := st.bootAt[i]
		if !ok {
			at = now.Add(bootDelay)
			st.bootAt[i] = at
		}
		if wait := at.Sub(now); wait > 0 {
			later(wait)
			continue
		}
		node := cke.NewNode(cke.NodeSpec{
			Name: ngv1.NodeName(g.Name, i), Flavor: flavor, Role: ngv1.NodeRoleWorker, Group: g.Name,
			Labels: g.Spec.Labels, Taints: toNodeTaints(g.Spec.Taints),
			NeverReady: slices.Contains(faults, FaultNodeNeverReady),
		})
		if err := o.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("creating node %q: %w", node.Name, err)
		}
		log.Info("node joined", "node", node.Name)
		delete(st.bootAt, i)
	}
	for idx, n := range existing {
		if idx < int(st.granted) || !n.DeletionTimestamp.IsZero() {
			continue
		}
		delete(st.bootAt, idx)
		at, ok := st.removeAt[idx]
		if !ok {
			at = now.Add(opts.TeardownDelay)
			st.removeAt[idx] = at
		}
		if wait := at.Sub(now); wait > 0 {
			later(wait)
			continue
		}
		if err := o.Delete(ctx, n); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting node %q: %w", n.Name, err)
		}
		log.Info("node removed", "node", n.Name)
	}
	live := int32(0)
	for _, n := range existing {
		if n.DeletionTimestamp.IsZero() {
			live++
		}
	}
	return reconcile.Result{RequeueAfter: next}, o.patchStatus(ctx, g, func(s *ngv1.NodeGroupStatus) {
		s.NodeCount = min(live, st.granted)
		s.TargetNodeCount = g.Spec.NodeCount
	})
}

// teardown removes a deleted group's Nodes after TeardownDelay, waits until they are really
// gone (Karpenter may hold a finalizer on them), then lets the group go.
func (o *Operator) teardown(ctx context.Context, log logr.Logger, g *ngv1.NodeGroup, opts Options) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(g, Finalizer) {
		return reconcile.Result{}, nil
	}
	now := time.Now()
	st := o.state(g, now)
	if st.teardownAt.IsZero() {
		st.teardownAt = now.Add(opts.TeardownDelay)
		if err := o.patchStatus(ctx, g, func(s *ngv1.NodeGroupStatus) {
			setCondition(s, g, ngv1.ConditionTerminating, metav1.ConditionTrue, "Deleting", "Node group is being deleted")
			setCondition(s, g, ngv1.ConditionReady, metav1.ConditionFalse, "Deleting", "Node group is being deleted")
		}); err != nil {
			return reconcile.Result{}, err
		}
	}
	if wait := st.teardownAt.Sub(now); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	remaining, err := o.deleteNodes(ctx, log, g.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if remaining > 0 {
		// The Node watch brings us back when they are gone.
		return reconcile.Result{}, nil
	}
	controllerutil.RemoveFinalizer(g, Finalizer)
	if err := o.Update(ctx, g); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("removing finalizer from NodeGroup %q: %w", g.Name, err)
	}
	log.Info("node group deleted")
	o.release(g.Name, st, now)
	return reconcile.Result{}, nil
}

// vanish plays the quota edge race seen upstream: the group is deleted with no event.
func (o *Operator) vanish(ctx context.Context, log logr.Logger, g *ngv1.NodeGroup) error {
	if _, err := o.deleteNodes(ctx, log, g.Name); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(g, Finalizer)
	if err := o.Update(ctx, g); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizer from vanishing NodeGroup %q: %w", g.Name, err)
	}
	if err := o.Delete(ctx, g); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting vanishing NodeGroup %q: %w", g.Name, err)
	}
	log.Info("node group vanished upstream")
	return nil
}

func (o *Operator) deleteNodes(ctx context.Context, log logr.Logger, group string) (remaining int, _ error) {
	nodes, err := o.nodesOf(ctx, group)
	if err != nil {
		return 0, err
	}
	for i := range nodes {
		n := &nodes[i]
		if n.DeletionTimestamp.IsZero() {
			if err := o.Delete(ctx, n); client.IgnoreNotFound(err) != nil {
				return 0, fmt.Errorf("deleting node %q: %w", n.Name, err)
			}
			log.Info("node removed", "node", n.Name)
		}
	}
	return len(nodes), nil
}

func (o *Operator) nodesOf(ctx context.Context, group string) ([]corev1.Node, error) {
	list := &corev1.NodeList{}
	if err := o.List(ctx, list, client.MatchingLabels{ngv1.LabelNodeGroup: group}); err != nil {
		return nil, fmt.Errorf("listing nodes of NodeGroup %q: %w", group, err)
	}
	return list.Items, nil
}

// baseUsage is what the organisation spends outside node groups: the control plane, whose
// Nodes carry a flavor label and no group label.
func (o *Operator) baseUsage(ctx context.Context) (usage, error) {
	list := &corev1.NodeList{}
	if err := o.List(ctx, list, client.MatchingLabels{ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane}); err != nil {
		return usage{}, fmt.Errorf("listing control-plane nodes: %w", err)
	}
	var u usage
	for _, n := range list.Items {
		if f, ok := cke.LookupFlavor(n.Labels[ngv1.LabelFlavor]); ok && n.Labels[ngv1.LabelNodeGroup] == "" {
			u = u.add(usage{CPU: f.CPU, GB: f.NominalGB})
		}
	}
	return u, nil
}

// heldLocked sums the ledger (except one group, which is being re-judged) and live leaks.
func (o *Operator) heldLocked(now time.Time, except string) usage {
	var u usage
	for name, held := range o.ledger {
		if name != except {
			u = u.add(held)
		}
	}
	leaks := o.leaks[:0]
	for _, l := range o.leaks {
		if now.Before(l.until) {
			u = u.add(l.usage)
			leaks = append(leaks, l)
		}
	}
	o.leaks = leaks
	return u
}

func (o *Operator) state(g *ngv1.NodeGroup, now time.Time) *groupState {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.groups[g.UID]
	if st == nil {
		st = &groupState{name: g.Name, firstSeen: now, bootAt: map[int]time.Time{}, removeAt: map[int]time.Time{}}
		// An operator restarted under a live cluster takes accepted groups as they are.
		if g.Status.Phase == ngv1.PhaseSynced {
			st.accepted, st.acceptedAt, st.granted, st.judgedGeneration = true, now, g.Status.TargetNodeCount, g.Generation
			if f, ok := cke.LookupFlavor(g.Spec.Flavor); ok {
				o.ledger[g.Name] = usage{CPU: f.CPU, GB: f.NominalGB}.times(int64(st.granted))
			}
		}
		o.groups[g.UID] = st
	}
	return st
}

func (o *Operator) release(name string, st *groupState, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.ledger, name)
	delete(o.batches, name)
	if !st.accepted && o.opts.LeakedReservationTTL > 0 && st.rejected != (usage{}) {
		o.leaks = append(o.leaks, leak{usage: st.rejected, until: now.Add(o.opts.LeakedReservationTTL)})
		// A reconcile of a stale copy of the group (finalizer already removed) releases it
		// again: it must not leak twice.
		st.rejected = usage{}
	}
}

func (o *Operator) forget(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.ledger, name)
	delete(o.batches, name)
	// No group of that name exists right now, so every state under it is stale.
	for uid, st := range o.groups {
		if st.name == name {
			delete(o.groups, uid)
		}
	}
}

func faultsOf(g *ngv1.NodeGroup, global []Fault) []Fault {
	raw, ok := g.Annotations[FaultAnnotation]
	if !ok {
		return global
	}
	var out []Fault
	for _, f := range strings.Split(raw, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, Fault(f))
		}
	}
	return out
}

func (o *Operator) patchStatus(ctx context.Context, g *ngv1.NodeGroup, mutate func(*ngv1.NodeGroupStatus)) error {
	before := g.DeepCopy()
	mutate(&g.Status)
	if equalStatus(before.Status, g.Status) {
		return nil
	}
	if err := o.Status().Patch(ctx, g, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("updating status of NodeGroup %q: %w", g.Name, err)
	}
	return nil
}

func equalStatus(a, b ngv1.NodeGroupStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

func setCondition(s *ngv1.NodeGroupStatus, g *ngv1.NodeGroup, t string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: g.Generation,
	})
}

func toNodeTaints(ts []ngv1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range ts {
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	return out
}

// nodeIndex parses "<group>-node<i>".
func nodeIndex(group, node string) (int, bool) {
	rest, ok := strings.CutPrefix(node, group+"-node")
	if !ok || rest == "" {
		return 0, false
	}
	i := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, true
}
