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
	"hash/fnv"
	"math/rand/v2"
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
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/quotaengine"
)

// Finalizer is the finalizer the operator holds on every NodeGroup until its VMs and Nodes
// are gone. The platform's own name was not captured; this is the fixtures' spelling.
const Finalizer = "api.clever-cloud.com/finalizer"

// FaultAnnotation injects faults into one group: a comma-separated list of Fault values.
const FaultAnnotation = "sim.clever-cloud.com/fault"

// Fault is a failure the platform has shown in the field, or one a provider must survive.
type Fault string

const (
	// FaultNeverAccept: the operator never decides; the group gets no status write at all
	// (an operator that is down or stuck).
	FaultNeverAccept Fault = "never-accept"
	// FaultVanishAfterAccept deletes the group upstream VanishDelay after its acceptance,
	// with no event: the object and its nodes disappear (a race at the quota's edge).
	FaultVanishAfterAccept Fault = "vanish-after-accept"
	// FaultNodeNeverReady boots the nodes but their kubelet never reports Ready.
	FaultNodeNeverReady Fault = "node-never-ready"
	// FaultSlowBoot makes the node join SlowBootDelay after creation instead of JoinDelay
	// (up to 185 s live); Synced moves by as much.
	FaultSlowBoot Fault = "slow-boot"
	// FaultUpstreamError makes every upstream call of the group (its creation, each resize)
	// fail for UpstreamErrorDuration from its decision before it goes through: a window of
	// its own, played like the platform-wide one (Options.UpstreamErrorFrom).
	FaultUpstreamError Fault = "upstream-error"
	// FaultLateRefusal accepts the group (Creating), then at JoinDelay publishes
	// ReconcileFailed=True reason ProvisioningFailed instead of a node; no node ever joins.
	FaultLateRefusal Fault = "late-refusal"
	// FaultNeverSync leaves the group Creating forever while its node joins.
	FaultNeverSync Fault = "never-sync"
	// FaultNeverSyncNoNode leaves the group Creating forever and no node ever joins.
	FaultNeverSyncNoNode Fault = "never-sync-no-node"
	// FaultUnknownRefusal refuses the creation with a ReconcileFailed reason a provider
	// cannot know (Options.UnknownFailureReason), empty message, as the first status write:
	// shaped like a quota refusal, never preceded by Creating. It takes nothing of the quota.
	FaultUnknownRefusal Fault = "unknown-refusal"
	// FaultDeadLaunch accepts the group (Creating), then at JoinDelay, instead of a node,
	// publishes ReconcileInProgress=False and ReconcileFailed=True with
	// Options.UnknownFailureReason, empty messages, and stays so in phase Creating forever: a
	// launch that looks dead. The reservation is held until deletion.
	FaultDeadLaunch Fault = "dead-launch"
)

// Status values the simulator writes beside the ones of the ngv1 package.
const (
	// ReasonDeleting is the Terminating reason.
	ReasonDeleting = "Deleting"
	// ReasonProvisioningFailed is the ReconcileFailed reason (and the phase) of FaultLateRefusal.
	ReasonProvisioningFailed = "ProvisioningFailed"
	// ReasonNetworkUnavailable is the default Options.UnknownFailureReason: a reason the
	// platform has never been seen writing, so no provider can know it.
	ReasonNetworkUnavailable = "NetworkUnavailable"
	// UpstreamErrorMessage is the message of ReconcileFailed reason UpstreamError, as seen live.
	UpstreamErrorMessage = "API error: RequestDidntReturnSuccess"
	// LateRefusalMessage is the ReconcileFailed message of FaultLateRefusal (%s: the flavor).
	LateRefusalMessage = "Failed to provision the node group's VMs: no %s capacity available"
	// NodeShutdownReason and NodeShutdownMessage are what a Node's Ready condition says once
	// its VM is torn down: the kubelet's own words when the machine shuts down.
	NodeShutdownReason  = "KubeletNotReady"
	NodeShutdownMessage = "node is shutting down"
)

// Options configure the operator. Every delay is measured from the group's creation (or,
// for a resize, from the operator seeing the new nodeCount); zero means "at once".
type Options struct {
	// QuotaCPU and QuotaRAMGB are the organisation quota. Zero means CKE's default, 40 / 40.
	// They may be raised or lowered at any time: what is held stays, later verdicts see it.
	QuotaCPU   int64
	QuotaRAMGB int64
	// OtherClusterCPU and OtherClusterGB are what the organisation's other clusters use of the
	// quota: counted by the quota engine, invisible to anything in this cluster.
	OtherClusterCPU int64
	OtherClusterGB  int64

	// DecisionDelay: creation → the operator's first status write, its decision (Creating
	// or QuotaExceeded). Live ~1 s.
	DecisionDelay time.Duration
	// JoinDelay: creation → the Node joins, while the group is still Creating. Live ~28 s.
	JoinDelay time.Duration
	// SyncDelayMin and SyncDelayMax: creation → phase Synced with Ready=True, drawn per group
	// in this range (live 38–58 s). Never before the node joined.
	SyncDelayMin time.Duration
	SyncDelayMax time.Duration
	// SlowSyncProbability is the chance that a group syncs only after SlowSyncDelay (live:
	// one group stayed Creating 6 min 30 s).
	SlowSyncProbability float64
	SlowSyncDelay       time.Duration
	// Seed makes the per-group draws (sync delay, slow outlier) reproducible: a group's draw
	// depends only on Seed and its name.
	Seed uint64
	// TeardownDelay: delete (or scale-down) → the VM is gone and its Node deleted. Live 30–40 s.
	TeardownDelay time.Duration
	// VanishDelay: acceptance → the upstream deletion of FaultVanishAfterAccept groups.
	VanishDelay time.Duration
	// SlowBootDelay replaces JoinDelay for FaultSlowBoot groups.
	SlowBootDelay time.Duration
	// UpstreamErrorDuration is how long FaultUpstreamError lasts on each upstream call
	// (live: about an hour).
	UpstreamErrorDuration time.Duration
	// UpstreamErrorFrom and UpstreamErrorFor are a platform-wide upstream failure: from that
	// time, for that long, every group whose creation or resize runs shows UpstreamError
	// (decisions are still made), and its operation makes no progress; afterwards each
	// resumes where it stopped. Zero UpstreamErrorFor: none. See UpstreamOutage.
	UpstreamErrorFrom time.Time
	UpstreamErrorFor  time.Duration
	// UnknownFailureReason is the ReconcileFailed reason of FaultUnknownRefusal and
	// FaultDeadLaunch; empty means ReasonNetworkUnavailable.
	UnknownFailureReason string
	// Faults apply to every group that has no FaultAnnotation.
	Faults []Fault

	// QuotaBatchWindow > 0 makes the quota engine judge concurrent creations together:
	// a batch opens at the creation of its first member, takes every creation within the
	// window, and is judged at max(window, DecisionDelay) after it opened; if the members'
	// sum overflows the quota, all are refused. Each member still gets its verdict written
	// DecisionDelay after its own creation (with window ≤ DecisionDelay, as live).
	QuotaBatchWindow time.Duration
	// LeakedReservationTTL > 0 makes the quota engine keep, this long, the reservation of a
	// group deleted after a refusal, before its decision, or while its first reconcile runs.
	LeakedReservationTTL time.Duration
	// LegacyQuotaMessage writes the 2026-06 refusal message ("Quota exceeded: RAM max: limit
	// = 40.0 GB | actual = 48.0 GB") instead of today's empty one.
	LegacyQuotaMessage bool
	// StampTopologyLabels puts topology.kubernetes.io/region and /zone on nodes; today's
	// platform does not.
	StampTopologyLabels bool

	Log logr.Logger
}

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

// controlPlaneHolder is the quota engine's name for the control plane's use: not a valid
// NodeGroup name, so it cannot collide with one.
const controlPlaneHolder = "control plane"

// groupState is what the operator decided about one group. Status writes are derived from it.
type groupState struct {
	name string
	// born is when the operator first saw the group: its creation, give or take a watch event.
	born time.Time
	// syncDelay is this group's drawn creation → Synced delay.
	syncDelay time.Duration

	// accepted: the quota engine granted the group's creation.
	accepted  bool
	decidedAt time.Time
	// granted is how many nodes the quota engine granted.
	granted int32
	// judgedGeneration stops a spec from being judged again until it changes.
	judgedGeneration int64
	// enlistedGeneration is the latest spec generation handed to the quota engine as a
	// creation.
	enlistedGeneration int64
	// changeSeen is when the operator saw a spec generation it has not judged yet.
	changeSeen     time.Time
	changeSeenGen  int64
	refused        bool   // the latest judgement refused
	refusalReason  string // its ReconcileFailed reason, also the phase
	refusalMessage string // its message (empty unless LegacyQuotaMessage)

	// op is the running upstream operation (creation or resize); nil or done when idle.
	op *operation

	// rejoinAt: nodes whose object was deleted while their VM lives re-register then.
	rejoinAt map[int]time.Time
	// removeAt: nodes beyond the granted count are torn down then.
	removeAt map[int]time.Time

	teardownAt time.Time
	tornDown   bool
}

// operation is one upstream call: the group's creation or a resize.
//
// Its milestones are amounts of work from its start, not times: the work stops while an
// upstream-error window is open, so the same operation lands later when a window opens over
// it, and a window set, moved or lifted at run time moves every milestone still to come.
type operation struct {
	creation bool
	start    time.Time
	// from is the number of nodes before the operation; nodes from..granted-1 are new.
	from int32
	// fault is the operation's own FaultUpstreamError window (zero: none).
	fault window
	join  time.Duration // new nodes join (never: they do not)
	sync  time.Duration // the operation completes (never: it does not)
	fail  time.Duration // FaultLateRefusal or FaultDeadLaunch fail it (never: nothing fails)
	// failInPlace: the failure keeps phase Creating (FaultDeadLaunch).
	failInPlace bool
	done        bool
}

// never is a milestone an operation does not reach.
const never time.Duration = -1

// window is a stretch of time in which upstream calls fail.
type window struct {
	from  time.Time
	until time.Time
}

func (w window) contains(t time.Time) bool { return !t.Before(w.from) && t.Before(w.until) }

// windows are the upstream-error windows an operation sees, earliest first.
func (op *operation) windows(opts Options) []window {
	var ws []window
	if !op.fault.until.IsZero() {
		ws = append(ws, op.fault)
	}
	if opts.UpstreamErrorFor > 0 {
		ws = append(ws, window{from: opts.UpstreamErrorFrom, until: opts.UpstreamErrorFrom.Add(opts.UpstreamErrorFor)})
	}
	slices.SortFunc(ws, func(a, b window) int { return a.from.Compare(b.from) })
	return ws
}

// at is when the operation reaches work d, its work paused in ws; zero for never.
func (op *operation) at(d time.Duration, ws []window) time.Time {
	if d < 0 {
		return time.Time{}
	}
	t, left := op.start, d
	for _, w := range ws {
		if !w.until.After(t) {
			continue
		}
		if w.from.After(t) {
			gap := w.from.Sub(t)
			if left <= gap {
				break
			}
			left -= gap
		}
		t = w.until
	}
	return t.Add(left)
}

// failing reports whether an upstream error shows at now.
func failing(ws []window, now time.Time) bool {
	return slices.ContainsFunc(ws, func(w window) bool { return w.contains(now) })
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

// engineOptions are the quota engine's share of the operator's options.
func engineOptions(o Options) quotaengine.Options {
	return quotaengine.Options{
		Limit:         quotaengine.Usage{CPU: o.QuotaCPU, GB: o.QuotaRAMGB},
		Other:         quotaengine.Usage{CPU: o.OtherClusterCPU, GB: o.OtherClusterGB},
		BatchWindow:   o.QuotaBatchWindow,
		DecisionDelay: o.DecisionDelay,
		LeakTTL:       o.LeakedReservationTTL,
		LegacyMessage: o.LegacyQuotaMessage,
	}
}

func withDefaults(o Options) Options {
	if o.QuotaCPU == 0 {
		o.QuotaCPU = cke.DefaultQuotaCPU
	}
	if o.QuotaRAMGB == 0 {
		o.QuotaRAMGB = cke.DefaultQuotaRAMGB
	}
	if o.SyncDelayMax < o.SyncDelayMin {
		o.SyncDelayMax = o.SyncDelayMin
	}
	if o.UnknownFailureReason == "" {
		o.UnknownFailureReason = ReasonNetworkUnavailable
	}
	return o
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

// Reconcile moves one NodeGroup along its timeline.
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
	now := time.Now()
	st := o.state(g, now, opts)
	if !g.DeletionTimestamp.IsZero() {
		return o.teardown(ctx, log, g, st, opts, now)
	}
	if !controllerutil.ContainsFinalizer(g, Finalizer) {
		// A metadata update, not a status write: the first status write is the decision.
		controllerutil.AddFinalizer(g, Finalizer)
		if err := o.Update(ctx, g); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer to NodeGroup %q: %w", g.Name, err)
		}
	}
	flavor, ok := cke.LookupFlavor(g.Spec.Flavor)
	if !ok {
		// The served CRD's enum makes this unreachable; a hand-edited CRD must not crash the
		// operator, which leaves such a group alone.
		log.Error(nil, "NodeGroup with a flavor outside the catalogue left alone", "flavor", g.Spec.Flavor)
		return reconcile.Result{}, nil
	}
	faults := faultsOf(g, opts.Faults)
	if slices.Contains(faults, FaultNeverAccept) && !st.accepted && !st.refused {
		return reconcile.Result{}, nil
	}

	var next wakeup
	if st.judgedGeneration != g.Generation {
		if st.changeSeenGen != g.Generation {
			st.changeSeen, st.changeSeenGen = now, g.Generation
			if st.judgedGeneration == 0 {
				st.changeSeen = st.born
			}
		}
		if !st.accepted && st.enlistedGeneration != g.Generation && !slices.Contains(faults, FaultUnknownRefusal) {
			// The engine takes the creation (into a batch) when it is made, not when its
			// verdict is written.
			if err := o.holdControlPlane(ctx, now); err != nil {
				return reconcile.Result{}, err
			}
			o.quota.Create(g.Name, demand(flavor, g.Spec.NodeCount), st.changeSeen)
			st.enlistedGeneration = g.Generation
		}
		if at := st.changeSeen.Add(opts.DecisionDelay); now.Before(at) {
			next.at(at)
		} else if wait, err := o.judge(ctx, log, g, st, flavor, faults, opts, now); err != nil {
			return reconcile.Result{}, err
		} else if wait > 0 {
			next.at(now.Add(wait))
		}
	}
	if st.accepted && slices.Contains(faults, FaultVanishAfterAccept) {
		if at := st.decidedAt.Add(opts.VanishDelay); now.Before(at) {
			next.at(at)
		} else {
			return reconcile.Result{}, o.vanish(ctx, log, g, st, now)
		}
	}
	live := int32(0)
	if st.accepted {
		var err error
		if live, err = o.converge(ctx, log, g, st, flavor, faults, opts, now, &next); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := o.patchStatus(ctx, g, func(s *ngv1.NodeGroupStatus) { o.status(s, g, st, live, opts, now) }); err != nil {
		return reconcile.Result{}, err
	}
	return next.result(now), nil
}

// judge asks the quota engine about the spec's nodeCount (a creation's verdict, or a resize)
// and starts the operation it grants. It returns a wait while the verdict is not given yet.
func (o *Operator) judge(ctx context.Context, log logr.Logger, g *ngv1.NodeGroup, st *groupState, flavor cke.Flavor, faults []Fault, opts Options, now time.Time) (time.Duration, error) {
	want := demand(flavor, g.Spec.NodeCount)
	var accepted bool
	message, reason := "", ngv1.ReasonQuotaExceeded
	switch {
	case !st.accepted && slices.Contains(faults, FaultUnknownRefusal):
		reason = opts.UnknownFailureReason
	case !st.accepted:
		d, decided := o.quota.Decide(g.Name, now)
		if !decided {
			if d.At.IsZero() {
				// The engine has lost the creation (only a bug would do it): enlisting it
				// again beats waiting forever for a verdict.
				o.quota.Create(g.Name, want, now)
				st.enlistedGeneration = g.Generation
				return max(opts.DecisionDelay, time.Millisecond), nil
			}
			return max(d.At.Sub(now), time.Millisecond), nil
		}
		accepted, message = d.Accepted, d.Message
	default:
		if err := o.holdControlPlane(ctx, now); err != nil {
			return 0, err
		}
		accepted, message = o.quota.Resize(g.Name, want, now)
	}

	st.judgedGeneration = g.Generation
	if !accepted {
		st.refused, st.refusalReason, st.refusalMessage = true, reason, message
		log.Info("refused", "reason", reason, "nodeCount", g.Spec.NodeCount, "message", message)
		return 0, nil
	}
	st.refused, st.refusalReason, st.refusalMessage = false, "", ""
	op := &operation{creation: !st.accepted, start: st.changeSeen, from: st.granted}
	if !st.accepted {
		st.accepted, st.decidedAt = true, now
		op.from = 0
	}
	if g.Spec.NodeCount == st.granted && !op.creation {
		// Nothing upstream to do (e.g. a labels-only change).
		return 0, nil
	}
	st.granted = g.Spec.NodeCount
	o.plan(op, st, faults, opts, now)
	st.op = op
	log.Info("accepted", "nodeCount", g.Spec.NodeCount, "creation", op.creation, "join", op.join, "sync", op.sync)
	return 0, nil
}

// demand is what n nodes of a flavor take of the quota.
func demand(f cke.Flavor, n int32) quotaengine.Usage {
	return quotaengine.Usage{CPU: f.CPU, GB: f.NominalGB}.Times(int64(n))
}

// plan lays out an accepted operation's milestones.
func (o *Operator) plan(op *operation, st *groupState, faults []Fault, opts Options, now time.Time) {
	op.join, op.sync, op.fail = never, never, never
	if slices.Contains(faults, FaultUpstreamError) && opts.UpstreamErrorDuration > 0 {
		// The call fails from the decision on, then goes through.
		op.fault = window{from: now, until: now.Add(opts.UpstreamErrorDuration)}
	}
	if !op.creation && st.granted < op.from {
		// Scale-down: the extra VMs go after TeardownDelay, then the group is synced.
		op.sync = opts.TeardownDelay
		return
	}
	join := opts.JoinDelay
	if op.creation && slices.Contains(faults, FaultSlowBoot) && opts.SlowBootDelay > join {
		join = opts.SlowBootDelay
	}
	// Synced comes the drawn delay after the start, never before the node joined; a slow
	// boot moves it by as much as it moves the join.
	op.join = join
	op.sync = max(st.syncDelay+join-opts.JoinDelay, join)
	if !op.creation {
		return
	}
	switch {
	case slices.Contains(faults, FaultLateRefusal):
		op.fail, op.join, op.sync = op.join, never, never
	case slices.Contains(faults, FaultDeadLaunch):
		op.fail, op.join, op.sync, op.failInPlace = op.join, never, never, true
	case slices.Contains(faults, FaultNeverSyncNoNode):
		op.join, op.sync = never, never
	case slices.Contains(faults, FaultNeverSync):
		op.sync = never
	}
}

// converge makes the Nodes follow the operation: new nodes join at their time, nodes beyond
// the granted count are torn down after TeardownDelay, a node object deleted while its VM
// lives re-registers. It returns the number of live (not terminating) nodes.
func (o *Operator) converge(ctx context.Context, log logr.Logger, g *ngv1.NodeGroup, st *groupState, flavor cke.Flavor, faults []Fault, opts Options, now time.Time, next *wakeup) (int32, error) {
	nodes, err := o.nodesOf(ctx, g.Name)
	if err != nil {
		return 0, err
	}
	existing := map[int]*corev1.Node{}
	for i := range nodes {
		if idx, ok := nodeIndex(g.Name, nodes[i].Name); ok {
			existing[idx] = &nodes[i]
		}
	}
	op := st.op
	var ws []window
	if op != nil && !op.done {
		ws = op.windows(opts)
		if syncAt := op.at(op.sync, ws); !syncAt.IsZero() && !now.Before(syncAt) {
			op.done = true
			// The group's first reconcile (or a resize begun during it) is over: deleting it
			// now gives its reservation back.
			o.quota.Built(g.Name, now)
		}
	}
	for i := 0; i < int(st.granted); i++ {
		delete(st.removeAt, i)
		if existing[i] != nil {
			delete(st.rejoinAt, i)
			continue
		}
		var at time.Time
		if op != nil && !op.done && int32(i) >= op.from {
			if at = op.at(op.join, ws); at.IsZero() {
				continue // this operation never brings its nodes
			}
		} else {
			// The VM lives but its Node object went: its kubelet registers it again.
			if _, ok := st.rejoinAt[i]; !ok {
				st.rejoinAt[i] = now.Add(opts.JoinDelay)
			}
			at = st.rejoinAt[i]
		}
		if now.Before(at) {
			next.at(at)
			continue
		}
		node := cke.NewNode(cke.NodeSpec{
			Name: ngv1.NodeName(g.Name, i), Flavor: flavor, Role: ngv1.NodeRoleWorker, Group: g.Name,
			Labels: g.Spec.Labels, Taints: toNodeTaints(g.Spec.Taints),
			NeverReady: slices.Contains(faults, FaultNodeNeverReady),
			Topology:   opts.StampTopologyLabels,
		})
		if err := o.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("creating node %q: %w", node.Name, err)
		}
		log.Info("node joined", "node", node.Name)
		delete(st.rejoinAt, i)
		existing[i] = node
	}
	for idx, n := range existing {
		if idx < int(st.granted) || !n.DeletionTimestamp.IsZero() {
			continue
		}
		at, ok := st.removeAt[idx]
		if !ok {
			at = now.Add(opts.TeardownDelay)
			if op != nil && !op.done && !op.creation {
				at = op.start.Add(opts.TeardownDelay)
			}
			st.removeAt[idx] = at
		}
		if now.Before(at) {
			next.at(at)
			continue
		}
		if err := o.tearDownVM(ctx, log, n); err != nil {
			return 0, err
		}
		delete(existing, idx)
	}
	if op != nil && !op.done {
		wake := []time.Time{op.at(op.fail, ws), op.at(op.sync, ws)}
		for _, w := range ws {
			wake = append(wake, w.from, w.until)
		}
		for _, t := range wake {
			if !t.IsZero() && now.Before(t) {
				next.at(t)
			}
		}
	}
	live := int32(0)
	for idx, n := range existing {
		if idx < int(st.granted) && n.DeletionTimestamp.IsZero() {
			live++
		}
	}
	return live, nil
}

// status writes what the operator has decided so far into s.
func (o *Operator) status(s *ngv1.NodeGroupStatus, g *ngv1.NodeGroup, st *groupState, live int32, opts Options, now time.Time) {
	if st.refused {
		// The refusal is the whole write: no Creating, no ReconcileInProgress before it. A
		// refused resize of a running group keeps what the group already showed.
		s.Phase = st.refusalReason
		setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, st.refusalReason, st.refusalMessage)
		if st.accepted {
			s.NodeCount = live
		}
		return
	}
	if !st.accepted {
		return // not decided yet: no write
	}
	s.UpstreamID = upstreamID(g)
	s.NodeCount = live
	op := st.op
	if op == nil || op.done {
		s.Phase = ngv1.PhaseSynced
		s.TargetNodeCount = st.granted
		s.Labels, s.Taints = g.Spec.Labels, g.Spec.Taints
		setCondition(s, g, ngv1.ConditionReady, metav1.ConditionTrue, ngv1.ReasonSynced, "")
		setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionFalse, ngv1.ReasonSynced, "")
		setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionFalse, ngv1.ReasonSynced, "")
		return
	}
	s.TargetNodeCount = st.granted
	if op.creation {
		s.Phase = ngv1.PhaseCreating
		setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, ngv1.ReasonCreating, "")
	} else {
		s.Phase = ngv1.PhaseScaling
		setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, ngv1.ReasonScaling, "")
	}
	ws := op.windows(opts)
	failAt := op.at(op.fail, ws)
	switch {
	case !failAt.IsZero() && !now.Before(failAt) && op.failInPlace:
		// The operator gave up without saying so: still Creating, no longer in progress.
		reason := opts.UnknownFailureReason
		setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionFalse, reason, "")
		setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, reason, "")
	case !failAt.IsZero() && !now.Before(failAt):
		s.Phase = ReasonProvisioningFailed
		setCondition(s, g, ngv1.ConditionReconcileInProgress, metav1.ConditionFalse, ReasonProvisioningFailed, "")
		setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, ReasonProvisioningFailed, fmt.Sprintf(LateRefusalMessage, g.Spec.Flavor))
	case failing(ws, now):
		s.Phase = ngv1.PhaseUpstreamError
		setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, ngv1.ReasonUpstreamError, UpstreamErrorMessage)
	default:
		if c := meta.FindStatusCondition(s.Conditions, ngv1.ConditionReconcileFailed); c != nil && c.Status == metav1.ConditionTrue {
			// Recovered from an upstream error.
			setCondition(s, g, ngv1.ConditionReconcileFailed, metav1.ConditionFalse, ngv1.ReasonSynced, "")
		}
	}
}

// teardown plays a delete: Terminating at once; TeardownDelay later the VMs are gone (their
// Nodes turn NotReady, the kubelet having shut down) and the Node objects are deleted; the
// finalizer goes once the Node objects are gone. A Karpenter finalizer on a Node therefore
// keeps the group until Karpenter lets the Node go, which Karpenter does for a NotReady Node
// as soon as the cloud provider reports its instance gone (see sim/README.md, "Deletion").
func (o *Operator) teardown(ctx context.Context, log logr.Logger, g *ngv1.NodeGroup, st *groupState, opts Options, now time.Time) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(g, Finalizer) {
		return reconcile.Result{}, nil
	}
	if st.teardownAt.IsZero() {
		st.teardownAt = now.Add(opts.TeardownDelay)
		log.Info("node group deleted, tearing down", "at", st.teardownAt)
	}
	if err := o.patchStatus(ctx, g, func(s *ngv1.NodeGroupStatus) {
		setCondition(s, g, ngv1.ConditionTerminating, metav1.ConditionTrue, ReasonDeleting, "")
	}); err != nil {
		return reconcile.Result{}, err
	}
	nodes, err := o.nodesOf(ctx, g.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	// A group that never got a VM (undecided, refused) has nothing to tear down.
	if st.accepted && !st.tornDown {
		if wait := st.teardownAt.Sub(now); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	if !st.tornDown {
		// The VMs are gone: the quota engine gives the reservation back, or leaks it (a
		// refused group, one deleted before its decision or while its creation ran).
		st.tornDown = true
		o.quota.Delete(g.Name, now)
	}
	// Every Node of the group goes with its VM, including one that was already being deleted
	// (e.g. by Karpenter) and must now show that its kubelet stopped.
	for i := range nodes {
		if err := o.tearDownVM(ctx, log, &nodes[i]); err != nil {
			return reconcile.Result{}, err
		}
	}
	if len(nodes) > 0 {
		// The Node watch brings us back when they are gone.
		return reconcile.Result{}, nil
	}
	controllerutil.RemoveFinalizer(g, Finalizer)
	if err := o.Update(ctx, g); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("removing finalizer from NodeGroup %q: %w", g.Name, err)
	}
	log.Info("node group gone")
	return reconcile.Result{}, nil
}

// tearDownVM plays a VM's end: the Node turns NotReady, as a kubelet shutting down reports,
// its kubelet stops (no more status nor Lease renewals: a Node still held turns Unknown after
// the node lifecycle controller's grace period) and the operator deletes the Node object.
// It is idempotent, and repairs a Ready condition the fake kubelet wrote in between.
func (o *Operator) tearDownVM(ctx context.Context, log logr.Logger, n *corev1.Node) error {
	// Stopped through the label, which kwok acts on at once (cke.KubeletLabel): it cancels the
	// status update it had scheduled, which would otherwise write Ready=True over the report
	// below (20–25 s after its previous one), and stops renewing the Lease.
	if n.Labels[cke.KubeletLabel] != cke.KubeletStopped {
		before := n.DeepCopy()
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[cke.KubeletLabel] = cke.KubeletStopped
		if err := o.Patch(ctx, n, client.MergeFrom(before)); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("stopping the kubelet of node %q: %w", n.Name, err))
		}
	}
	if ready := nodeCondition(n, corev1.NodeReady); ready == nil || ready.Status == corev1.ConditionTrue {
		before := n.DeepCopy()
		now := metav1.Now()
		cond := corev1.NodeCondition{
			Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: NodeShutdownReason, Message: NodeShutdownMessage,
			LastHeartbeatTime: now, LastTransitionTime: now,
		}
		if ready == nil {
			n.Status.Conditions = append(n.Status.Conditions, cond)
		} else {
			*ready = cond
		}
		if err := o.Status().Patch(ctx, n, client.MergeFrom(before)); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("marking node %q NotReady: %w", n.Name, err))
		}
	}
	if n.DeletionTimestamp.IsZero() {
		if err := o.Delete(ctx, n); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting node %q: %w", n.Name, err)
		}
		log.Info("VM torn down, node deleted", "node", n.Name)
	}
	return nil
}

// vanish plays the quota edge race seen upstream: the group is deleted with no event.
func (o *Operator) vanish(ctx context.Context, log logr.Logger, g *ngv1.NodeGroup, st *groupState, now time.Time) error {
	nodes, err := o.nodesOf(ctx, g.Name)
	if err != nil {
		return err
	}
	for i := range nodes {
		if err := o.tearDownVM(ctx, log, &nodes[i]); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(g, Finalizer)
	if err := o.Update(ctx, g); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizer from vanishing NodeGroup %q: %w", g.Name, err)
	}
	if err := o.Delete(ctx, g); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting vanishing NodeGroup %q: %w", g.Name, err)
	}
	st.tornDown = true
	o.quota.Drop(g.Name, now)
	log.Info("node group vanished upstream")
	return nil
}

func (o *Operator) nodesOf(ctx context.Context, group string) ([]corev1.Node, error) {
	list := &corev1.NodeList{}
	if err := o.List(ctx, list, client.MatchingLabels{ngv1.LabelNodeGroup: group}); err != nil {
		return nil, fmt.Errorf("listing nodes of NodeGroup %q: %w", group, err)
	}
	return list.Items, nil
}

// holdControlPlane tells the quota engine what the control plane uses: its Nodes carry a
// flavor label and no group label. It reads the cache.
func (o *Operator) holdControlPlane(ctx context.Context, now time.Time) error {
	list := &corev1.NodeList{}
	if err := o.List(ctx, list, client.MatchingLabels{ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane}); err != nil {
		return fmt.Errorf("listing control-plane nodes: %w", err)
	}
	var u quotaengine.Usage
	for _, n := range list.Items {
		if f, ok := cke.LookupFlavor(n.Labels[ngv1.LabelFlavor]); ok && n.Labels[ngv1.LabelNodeGroup] == "" {
			u = u.Add(demand(f, 1))
		}
	}
	o.quota.Hold(controlPlaneHolder, u, now)
	return nil
}

// state returns the operator's memory of a group, starting it at the first sight.
func (o *Operator) state(g *ngv1.NodeGroup, now time.Time, opts Options) *groupState {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.groups[g.UID]
	if st != nil {
		return st
	}
	st = &groupState{name: g.Name, born: now, rejoinAt: map[int]time.Time{}, removeAt: map[int]time.Time{}}
	st.syncDelay = drawSyncDelay(opts, g.Name)
	// An operator started under a live cluster takes decided groups as they are.
	if g.Status.UpstreamID != "" {
		st.born = g.CreationTimestamp.Time
		st.accepted, st.decidedAt, st.granted, st.judgedGeneration = true, st.born, g.Status.TargetNodeCount, g.Generation
		if f, ok := cke.LookupFlavor(g.Spec.Flavor); ok {
			o.quota.Hold(g.Name, demand(f, st.granted), now)
		}
	}
	o.groups[g.UID] = st
	return st
}

// drawSyncDelay draws a group's creation → Synced delay from Seed and its name only, so a run
// is reproducible whatever order groups are seen in.
func drawSyncDelay(opts Options, name string) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	r := rand.New(rand.NewPCG(opts.Seed, h.Sum64()))
	d := opts.SyncDelayMin
	if spread := opts.SyncDelayMax - opts.SyncDelayMin; spread > 0 {
		d += time.Duration(r.Int64N(int64(spread) + 1))
	}
	if opts.SlowSyncProbability > 0 && r.Float64() < opts.SlowSyncProbability && opts.SlowSyncDelay > d {
		d = opts.SlowSyncDelay
	}
	return d
}

// forget drops the memory of a group whose object is gone. A group that went without the
// operator's teardown (deleted before it held its finalizer) counts as deleted for the quota
// engine; after a teardown the engine has forgotten it already.
func (o *Operator) forget(name string) {
	o.quota.Delete(name, time.Now())
	o.mu.Lock()
	defer o.mu.Unlock()
	// No group of that name exists right now, so every state under it is stale.
	for uid, st := range o.groups {
		if st.name == name {
			delete(o.groups, uid)
		}
	}
}

// knownGroups are requests for every group the operator remembers.
func (o *Operator) knownGroups() []reconcile.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	names := make([]string, 0, len(o.groups))
	for _, st := range o.groups {
		names = append(names, st.name)
	}
	slices.Sort(names)
	reqs := make([]reconcile.Request, 0, len(names))
	for _, n := range slices.Compact(names) {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
	return reqs
}

func upstreamID(g *ngv1.NodeGroup) string { return "nodegroup_" + string(g.UID) }

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
	if equality.Semantic.DeepEqual(before.Status, g.Status) {
		return nil
	}
	if err := o.Status().Patch(ctx, g, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("updating status of NodeGroup %q: %w", g.Name, err)
	}
	return nil
}

func setCondition(s *ngv1.NodeGroupStatus, g *ngv1.NodeGroup, t string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: g.Generation,
	})
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
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

// wakeup collects the earliest time a reconcile must run again.
type wakeup struct{ t time.Time }

func (w *wakeup) at(t time.Time) {
	if w.t.IsZero() || t.Before(w.t) {
		w.t = t
	}
}

func (w *wakeup) result(now time.Time) reconcile.Result {
	if w.t.IsZero() {
		return reconcile.Result{}
	}
	// A millisecond late, so the deadline has passed when the reconcile runs.
	return reconcile.Result{RequeueAfter: max(w.t.Sub(now), 0) + time.Millisecond}
}
