package operator

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
)

// groupState is what the operator decided about one group. Status writes are derived from it.
type groupState struct {
	name string
	// born is when the operator first saw the group: its creation, give or take a watch event.
	born time.Time
	// joinDelay and syncDelay are this group's drawn creation → Node joined and → Synced delays.
	joinDelay time.Duration
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

// state returns the operator's memory of a group, starting it at the first sight.
func (o *Operator) state(g *ngv1.NodeGroup, now time.Time, opts Options) *groupState {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.groups[g.UID]
	if st != nil {
		return st
	}
	st = &groupState{name: g.Name, born: now, rejoinAt: map[int]time.Time{}, removeAt: map[int]time.Time{}}
	st.joinDelay, st.syncDelay = drawJoinDelay(opts, g.Name), drawSyncDelay(opts, g.Name)
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
