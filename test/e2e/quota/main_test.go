// Package quota is the end-to-end suite of the organisation quota: the shipped bundle and
// controller on a simulated CKE of its own (sim/stack), asserted with test/harness, as
// test/e2e is. Its scenarios change what the rest of the suite takes as given — the platform's
// quota and the quota engine's quirks, and the controller's memory of both, which only a
// restart clears — so they live apart from it. Each scenario that teaches the controller
// something restarts it before and after, and the harness puts the operator's options back
// (and drops leaked reservations) at cleanup. `go test -short` skips the package.
package quota

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

var env *stack.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunSuite(m, "e2e/quota", func(e *stack.Env) { env = e }))
}

// platformQuirks turns on what CKE's quota engine does live (sim.LiveOptions): creations
// made within a second of each other are judged together and refused together, and the
// reservation of a refused group, or of a group deleted before it was built, is kept for
// minutes after the group is gone. The suite's fast profile has both off.
func platformQuirks(o *operator.Options) {
	live := sim.LiveOptions().Operator
	o.QuotaBatchWindow, o.LeakedReservationTTL = live.QuotaBatchWindow, live.LeakedReservationTTL
}

// freshController restarts the controller with overrides, and again with none when the test
// ends (before the scenario's cleanup): what it proves and remembers of the quota lives in
// its memory, so each scenario starts from one that knows nothing and leaves the next one
// the same.
func freshController(s *harness.Scenario, overrides map[string]string) {
	s.T.Helper()
	s.T.Cleanup(func() { s.RestartController(nil) })
	s.RestartController(overrides)
}

// refusals counts the NodeGroups the platform's quota engine refused since the controller
// started.
func refusals(s *harness.Scenario) float64 {
	return s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"outcome": "QuotaExceeded"})
}

// groupRecord is what the platform did with one NodeGroup, as a watch saw it.
type groupRecord struct {
	name, flavor string
	// index is the group's rank among the pool's creations, from 1.
	index int
	// verdict is the phase of the operator's first status write (its decision: Creating or
	// QuotaExceeded); empty while undecided.
	verdict string
	created time.Time
	decided time.Time
}

// groupLog follows a pool's NodeGroups from a watch started before any of them exists, in
// the order the apiserver wrote them: creations, decisions and deletions.
type groupLog struct {
	mu     sync.Mutex
	groups map[string]*groupRecord
	// probe says which creations are probes; nil disables the check.
	probe func(groupRecord) bool
	// violations are the creations that broke "a probe flies alone" (see probesFlewAlone).
	violations []string
}

// watchGroups starts a groupLog for pool. probe, when not nil, says which of its creations
// are probes (launches beyond the sure limit), each of which must fly alone.
func watchGroups(s *harness.Scenario, pool string, probe func(groupRecord) bool) *groupLog {
	s.T.Helper()
	w, err := env.Client.Watch(s.Ctx, &ngv1.NodeGroupList{}, client.MatchingLabels{karpv1.NodePoolLabelKey: pool})
	if err != nil {
		s.T.Fatal(err)
	}
	s.T.Cleanup(w.Stop)
	l := &groupLog{groups: map[string]*groupRecord{}, probe: probe}
	go func() {
		for ev := range w.ResultChan() {
			g, ok := ev.Object.(*ngv1.NodeGroup)
			if !ok {
				continue
			}
			l.observe(ev.Type, g)
		}
	}()
	return l
}

func (l *groupLog) observe(t watch.EventType, g *ngv1.NodeGroup) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	r := l.groups[g.Name]
	if r == nil {
		r = &groupRecord{name: g.Name, flavor: g.Spec.Flavor, index: len(l.groups) + 1, created: now}
		l.check(r)
		l.groups[g.Name] = r
	}
	if r.verdict != "" {
		return
	}
	switch {
	case g.Status.Phase != "":
		r.verdict, r.decided = g.Status.Phase, now
	case t == watch.Deleted || g.DeletionTimestamp != nil:
		// Gone before its decision: it awaits nothing any more.
		r.verdict, r.decided = "Deleted", now
	}
}

// check records a violation when r, just created, flies beside an undecided probe, or is a
// probe created while other groups await their decision.
func (l *groupLog) check(r *groupRecord) {
	if l.probe == nil {
		return
	}
	var waiting []string
	for _, o := range l.groups {
		if o.verdict == "" {
			waiting = append(waiting, o.name)
			if l.probe(*o) {
				l.violations = append(l.violations, r.name+" created beside probe "+o.name)
			}
		}
	}
	if l.probe(*r) && len(waiting) > 0 {
		slices.Sort(waiting)
		l.violations = append(l.violations, "probe "+r.name+" created while awaiting verdicts: "+strings.Join(waiting, ", "))
	}
}

// refused returns the groups whose creation the quota refused, in creation order. A group
// accepted and later refused a resize is not among them.
func (l *groupLog) refused() []groupRecord {
	return slices.DeleteFunc(l.all(), func(r groupRecord) bool { return r.verdict != ngv1.PhaseQuotaExceeded })
}

// all returns every group seen, in creation order.
func (l *groupLog) all() []groupRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]groupRecord, 0, len(l.groups))
	for _, r := range l.groups {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b groupRecord) int { return a.index - b.index })
	return out
}

// created is how many groups were created for the pool.
func (l *groupLog) created() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.groups)
}

// probesFlewAlone returns the violations of "a probe flies alone": a probe created while
// another group awaited its decision, or any group created while a probe awaited its own.
func (l *groupLog) probesFlewAlone() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.violations)
}

// flavorsOf lists the flavors of records.
func flavorsOf(records []groupRecord) []string {
	out := make([]string, 0, len(records))
	for _, r := range records {
		out = append(out, r.flavor)
	}
	return out
}
