package bench

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Timeline records, from watches, when the bench first observed each step of each object's
// life, with the bench's clock (millisecond resolution; object timestamps only have seconds).
type Timeline struct {
	mu     sync.Mutex
	Pods   map[string]*PodTimes
	Claims map[string]*ClaimTimes
	Groups map[string]*GroupTimes
	Nodes  map[string]*NodeTimes
	// changed is signalled (non-blocking) on every recorded change.
	changed chan struct{}
	recs    []*harness.Recording
	// lastFleetChange is when a NodeClaim or NodeGroup last appeared, was decided, started
	// deleting or went.
	lastFleetChange time.Time
}

// PodTimes are the steps of one pod.
type PodTimes struct {
	// DeletedAt: when its deletion was first seen (deletion timestamp or watch event).
	Created, Unschedulable, Bound, Running, DeletedAt time.Time
	// CreationTimestamp is the apiserver's (one-second resolution): unlike Created it does not
	// move when a loaded apiserver delivers a watch event late.
	CreationTimestamp time.Time
	Node              string
	Deleted           bool
}

// ClaimTimes are the steps of one NodeClaim. ProviderID is when its provider ID was first
// seen: until then Karpenter core's cluster state is not synced.
type ClaimTimes struct {
	Created, ProviderID, Launched, Registered, Initialized, Deleting time.Time
	// CreationTimestamp is the apiserver's, as for PodTimes.
	CreationTimestamp time.Time
	Node              string
	Gone              bool
}

// GroupTimes are the steps of one NodeGroup. Decided is the operator's first status write
// when it launches (phase Creating; Synced if the bench saw nothing earlier), Rejected its
// QuotaExceeded; Synced comes tens of seconds after the node joined.
type GroupTimes struct {
	Created, Decided, Synced, Rejected, Deleting time.Time
	Flavor                                       string
	Gone                                         bool
	Managed                                      bool
}

// NodeTimes are the steps of one Node.
type NodeTimes struct {
	// Registered: first seen without Karpenter's unregistered taint (Karpenter removes it when
	// it registers the node; pods cannot schedule before).
	Created, Ready, Registered time.Time
	// GoneAt: when its deletion event was seen.
	GoneAt        time.Time
	Group, Flavor string
	Gone          bool
}

func newTimeline() *Timeline {
	return &Timeline{
		Pods: map[string]*PodTimes{}, Claims: map[string]*ClaimTimes{},
		Groups: map[string]*GroupTimes{}, Nodes: map[string]*NodeTimes{},
		changed: make(chan struct{}, 1),
	}
}

func set(t *time.Time, now time.Time) {
	if t.IsZero() {
		*t = now
	}
}

// Watch records the objects of namespace ns (pods) and cluster-wide NodeClaims, NodeGroups
// and Nodes until Stop, through harness.Record. It returns once every recording has listed.
func (tl *Timeline) Watch(ctx context.Context, c client.WithWatch, ns string) error {
	for _, w := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{
		{&corev1.PodList{}, []client.ListOption{client.InNamespace(ns)}},
		{&karpv1.NodeClaimList{}, nil},
		{&ngv1.NodeGroupList{}, nil},
		{&corev1.NodeList{}, nil},
	} {
		// Resuming: a bench window would rather take a late time for what changed while a watch
		// was down (the window notes the gaps) than lose the rest of its run.
		existing, rec, err := harness.RecordResuming(ctx, c, w.list, func(ev harness.Event) {
			tl.observe(ev.Object, ev.At, ev.Type == watch.Deleted)
		}, w.opts...)
		if err != nil {
			tl.Stop()
			return err
		}
		now := time.Now()
		for _, o := range existing {
			tl.observe(o, now, false)
		}
		tl.mu.Lock()
		tl.recs = append(tl.recs, rec)
		tl.mu.Unlock()
	}
	return nil
}

// Stop ends the recordings and returns how many times a watch ended early and was resumed:
// what changed during a gap carries the time it was found, not the time it happened.
func (tl *Timeline) Stop() int {
	tl.mu.Lock()
	recs := tl.recs
	tl.recs = nil
	tl.mu.Unlock()
	gaps := 0
	for _, r := range recs {
		_ = r.Stop() // a resuming recording has no error to give
		gaps += r.Gaps()
	}
	return gaps
}

func (tl *Timeline) observe(obj client.Object, now time.Time, deleted bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	switch o := obj.(type) {
	case *corev1.Pod:
		p := tl.Pods[o.Name]
		if p == nil {
			p = &PodTimes{}
			tl.Pods[o.Name] = p
		}
		set(&p.Created, now)
		p.CreationTimestamp = o.CreationTimestamp.Time
		for _, c := range o.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				set(&p.Unschedulable, now)
			}
		}
		if o.Spec.NodeName != "" {
			set(&p.Bound, now)
			p.Node = o.Spec.NodeName
		}
		if o.Status.Phase == corev1.PodRunning && harness.PodReady(o) {
			set(&p.Running, now)
		}
		p.Deleted = p.Deleted || deleted || o.DeletionTimestamp != nil
		if p.Deleted {
			set(&p.DeletedAt, now)
		}
	case *karpv1.NodeClaim:
		c := tl.Claims[o.Name]
		if c == nil {
			c = &ClaimTimes{}
			tl.Claims[o.Name] = c
		}
		before := *c
		defer func() {
			if c.Deleting != before.Deleting || c.Gone != before.Gone || c.Created != before.Created {
				tl.lastFleetChange = now
			}
		}()
		set(&c.Created, now)
		c.CreationTimestamp = o.CreationTimestamp.Time
		if o.Status.ProviderID != "" {
			set(&c.ProviderID, now)
		}
		conds := o.StatusConditions()
		if conds.Get(karpv1.ConditionTypeLaunched).IsTrue() {
			set(&c.Launched, now)
		}
		if conds.Get(karpv1.ConditionTypeRegistered).IsTrue() {
			set(&c.Registered, now)
		}
		if conds.Get(karpv1.ConditionTypeInitialized).IsTrue() {
			set(&c.Initialized, now)
		}
		if o.Status.NodeName != "" {
			c.Node = o.Status.NodeName
		}
		if o.DeletionTimestamp != nil || deleted {
			set(&c.Deleting, now)
		}
		c.Gone = c.Gone || deleted
	case *ngv1.NodeGroup:
		g := tl.Groups[o.Name]
		if g == nil {
			g = &GroupTimes{}
			tl.Groups[o.Name] = g
		}
		before := *g
		defer func() {
			if g.Deleting != before.Deleting || g.Gone != before.Gone || g.Created != before.Created || g.Decided != before.Decided {
				tl.lastFleetChange = now
			}
		}()
		set(&g.Created, now)
		g.Flavor = o.Spec.Flavor
		g.Managed = g.Managed || o.Labels[karpv1.NodePoolLabelKey] != ""
		switch o.Status.Phase {
		case "Creating":
			set(&g.Decided, now)
		case "Synced":
			set(&g.Decided, now)
			set(&g.Synced, now)
		case "QuotaExceeded":
			set(&g.Rejected, now)
		}
		if o.DeletionTimestamp != nil || deleted {
			set(&g.Deleting, now)
		}
		g.Gone = g.Gone || deleted
	case *corev1.Node:
		n := tl.Nodes[o.Name]
		if n == nil {
			n = &NodeTimes{}
			tl.Nodes[o.Name] = n
		}
		set(&n.Created, now)
		n.Group = o.Labels[ngv1.LabelNodeGroup]
		n.Flavor = o.Labels[corev1.LabelInstanceTypeStable]
		if sim.NodeReady(o) {
			set(&n.Ready, now)
		}
		tainted := false
		for _, t := range o.Spec.Taints {
			tainted = tainted || t.Key == karpv1.UnregisteredTaintKey
		}
		if !tainted {
			set(&n.Registered, now)
		}
		n.Gone = n.Gone || deleted
		if deleted {
			set(&n.GoneAt, now)
		}
	}
	select {
	case tl.changed <- struct{}{}:
	default:
	}
}

// noneDeleting: no NodeClaim or NodeGroup is on its way out (locked).
func (tl *Timeline) noneDeleting() bool {
	for _, c := range tl.Claims {
		if !c.Deleting.IsZero() && !c.Gone {
			return false
		}
	}
	for _, g := range tl.Groups {
		if g.Managed && !g.Deleting.IsZero() && !g.Gone {
			return false
		}
	}
	return true
}

// noneJoining: every NodeClaim that is not on its way out is initialized (locked). Until a
// node joins, core's consolidation refuses any move that would put pods on it, so a fleet
// with a node still joining has not had its chance to settle.
func (tl *Timeline) noneJoining() bool {
	for _, c := range tl.Claims {
		if !c.Gone && c.Deleting.IsZero() && c.Initialized.IsZero() {
			return false
		}
	}
	return true
}

// lastJoined is when the last NodeClaim was initialized (locked): what makes its node a
// place consolidation may move pods to, and the nodes around it candidates consolidateAfter
// later.
func (tl *Timeline) lastJoined() time.Time {
	var last time.Time
	for _, c := range tl.Claims {
		if c.Initialized.After(last) {
			last = c.Initialized
		}
	}
	return last
}

// withoutProviderID is how long, between from and to, at least one NodeClaim created in
// that stretch had no provider ID (locked): the union of created → provider ID (or deletion,
// or to) over those claims.
func (tl *Timeline) withoutProviderID(from, to time.Time) time.Duration {
	type span struct{ a, b time.Time }
	var spans []span
	for _, c := range tl.Claims {
		if c.Created.Before(from) {
			continue
		}
		end := to
		for _, t := range []time.Time{c.ProviderID, c.Deleting} {
			if !t.IsZero() && t.Before(end) {
				end = t
			}
		}
		if end.After(c.Created) {
			spans = append(spans, span{c.Created, end})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].a.Before(spans[j].a) })
	var total time.Duration
	var cur *span
	for i := range spans {
		switch {
		case cur == nil:
			cur = &spans[i]
		case !spans[i].a.After(cur.b):
			if spans[i].b.After(cur.b) {
				cur.b = spans[i].b
			}
		default:
			total += cur.b.Sub(cur.a)
			cur = &spans[i]
		}
	}
	if cur != nil {
		total += cur.b.Sub(cur.a)
	}
	return total
}

// Read calls fn with the timeline locked.
func (tl *Timeline) Read(fn func(tl *Timeline)) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	fn(tl)
}

// WaitFor waits until cond (called with the timeline locked) holds, re-checking on every
// change and every second, or returns false at the deadline.
func (tl *Timeline) WaitFor(ctx context.Context, timeout time.Duration, cond func(tl *Timeline) bool) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		ok := false
		tl.Read(func(tl *Timeline) { ok = cond(tl) })
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tl.changed:
		case <-tick.C:
		}
	}
}
