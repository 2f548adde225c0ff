package harness

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

// VerdictDeleted is the verdict of a group deleted before the operator decided on it.
const VerdictDeleted = "Deleted"

// GroupRecord is what the platform did with one NodeGroup, as a GroupRecorder's watch saw it.
// A group is one object, one UID: a group deleted and created again under the same name is
// two records.
type GroupRecord struct {
	UID    types.UID
	Name   string
	Flavor string
	// Index is the group's rank among the recorded creations, from 1.
	Index int
	// Verdict is the phase of the operator's first status write (its decision: Creating or
	// QuotaExceeded), VerdictDeleted when the group went before any decision, empty while
	// undecided.
	Verdict string
	Created time.Time
	Decided time.Time
	// Deleted is when the watch saw the group go (zero while it exists).
	Deleted time.Time
}

// GroupRecorder follows a NodePool's NodeGroups, in the order the apiserver wrote them:
// creations, decisions and deletions. It starts from a list, so every creation after it
// started is recorded and nothing before it is taken for one. Its watch must last as long as
// the test: a watch that ends early fails the test, since whatever it missed would pass
// unseen.
type GroupRecorder struct {
	s    *Scenario
	pool string

	mu     sync.Mutex
	groups map[types.UID]*GroupRecord
	// probe says which creations are probes; nil disables the check.
	probe func(GroupRecord) bool
	// violations are the creations that broke "a probe flies alone" (see ProbesFlewAlone).
	violations []string
	rec        *Recording
	reported   bool
}

// RecordGroups starts a GroupRecorder for the NodeGroups of pool. probe, when not nil, says
// which creations are probes (launches beyond the sure limit), each of which must fly alone:
// created while no other group awaits its decision, and no group created while it awaits its
// own. The recording stops when the test ends; the test fails if the watch ended before.
func (s *Scenario) RecordGroups(pool string, probe func(GroupRecord) bool) *GroupRecorder {
	s.T.Helper()
	r := &GroupRecorder{s: s, pool: pool, groups: map[types.UID]*GroupRecord{}, probe: probe}
	_, rec, err := Record(s.Ctx, s.Env.Client, &ngv1.NodeGroupList{}, func(ev Event) {
		if g, ok := ev.Object.(*ngv1.NodeGroup); ok && !ev.Listed {
			r.observe(ev.Type, g, ev.At)
		}
	}, client.MatchingLabels{karpv1.NodePoolLabelKey: pool})
	if err != nil {
		s.T.Fatalf("recording the NodeGroups of pool %s: %v", pool, err)
	}
	r.rec = rec
	s.T.Cleanup(func() {
		if err := rec.Stop(); err != nil {
			r.fail(err)
		}
	})
	return r
}

// fail reports the recording's error, once.
func (r *GroupRecorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.reported {
		r.reported = true
		r.s.T.Errorf("NodeGroups of pool %s: %v", r.pool, err)
	}
}

// checkWatch fails the test if the watch ended early.
func (r *GroupRecorder) checkWatch() {
	if r.rec == nil {
		return
	}
	if err := r.rec.Err(); err != nil {
		r.fail(err)
	}
}

func (r *GroupRecorder) observe(t watch.EventType, g *ngv1.NodeGroup, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.groups[g.UID]
	if rec == nil {
		rec = &GroupRecord{UID: g.UID, Name: g.Name, Flavor: g.Spec.Flavor, Index: len(r.groups) + 1, Created: now}
		r.check(rec)
		r.groups[g.UID] = rec
	}
	if t == watch.Deleted && rec.Deleted.IsZero() {
		rec.Deleted = now
	}
	if rec.Verdict != "" {
		return
	}
	switch {
	case g.Status.Phase != "":
		rec.Verdict, rec.Decided = g.Status.Phase, now
	case t == watch.Deleted || g.DeletionTimestamp != nil:
		// Gone before its decision: it awaits nothing any more.
		rec.Verdict, rec.Decided = VerdictDeleted, now
	}
}

// check records a violation when rec, just created, flies beside an undecided probe, or is a
// probe created while other groups await their decision.
func (r *GroupRecorder) check(rec *GroupRecord) {
	if r.probe == nil {
		return
	}
	var waiting []string
	for _, o := range r.groups {
		if o.Verdict == "" {
			waiting = append(waiting, o.Name)
			if r.probe(*o) {
				r.violations = append(r.violations, rec.Name+" created beside probe "+o.Name)
			}
		}
	}
	if r.probe(*rec) && len(waiting) > 0 {
		slices.Sort(waiting)
		r.violations = append(r.violations, "probe "+rec.Name+" created while awaiting verdicts: "+strings.Join(waiting, ", "))
	}
}

// All returns every group created since the recording started, in creation order.
func (r *GroupRecorder) All() []GroupRecord {
	r.s.T.Helper()
	r.checkWatch()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]GroupRecord, 0, len(r.groups))
	for _, g := range r.groups {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b GroupRecord) int { return a.Index - b.Index })
	return out
}

// Refused returns the groups whose creation the quota refused, in creation order. A group
// accepted and later refused a resize is not among them.
func (r *GroupRecorder) Refused() []GroupRecord {
	r.s.T.Helper()
	return slices.DeleteFunc(r.All(), func(g GroupRecord) bool { return g.Verdict != ngv1.PhaseQuotaExceeded })
}

// Created is how many groups were created since the recording started, each object once:
// a group deleted and created again under its name counts twice.
func (r *GroupRecorder) Created() int {
	r.s.T.Helper()
	return len(r.All())
}

// ProbesFlewAlone returns the violations of "a probe flies alone": a probe created while
// another group awaited its decision, or any group created while a probe awaited its own.
func (r *GroupRecorder) ProbesFlewAlone() []string {
	r.s.T.Helper()
	r.checkWatch()
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.violations)
}

// String lists the records, one per line, for failure messages.
func (r *GroupRecorder) String() string {
	var b strings.Builder
	for _, g := range r.All() {
		fmt.Fprintf(&b, "#%d %s %s (uid %s) verdict %q\n", g.Index, g.Name, g.Flavor, g.UID, g.Verdict)
	}
	return b.String()
}

// FlavorsOfRecords lists the flavors of records, in their order.
func FlavorsOfRecords(records []GroupRecord) []string {
	out := make([]string, 0, len(records))
	for _, r := range records {
		out = append(out, r.Flavor)
	}
	return out
}
