package bench

import (
	"fmt"
	"testing"
	"time"
)

// ReplacementWorkloads are the workloads TestCostReplacement runs by default: those whose pods
// core alone packs onto nodes of another shape.
var ReplacementWorkloads = []string{"cpu-heavy", "mixed", "two-shapes"}

// CostReplacement measures the provider's replacement of ill-shaped nodes on a fleet core
// packed alone: the workload's n pods are launched with cost steering off and left to settle,
// then the controller restarts as shipped but for the replacement's minimum node age
// (COST_REPLACEMENT_MIN_NODE_AGE=1s, the hour compressed), and the fleet settles again. Both
// fleets are priced against the same bound (daemons per node); the run reports how many
// NodeGroups the replacement deleted and launched, how many of those it launched were deleted
// again (a node replaced twice), and when the fleet last changed after the restart.
func (b *Bench) CostReplacement(t *testing.T, w Workload, n int, tm SteeringTiming) *Result {
	run := b.launchWorkload(t, w, n, tm, map[string]string{"COST_STEERING": "false"})
	s, win, cat, bounded, total := run.s, run.win, run.cat, run.bounded, run.total
	figures := map[string]float64{}
	var misses []string
	ok := win.TL.WaitFor(s.Ctx, tm.Timeout, running(total)) && run.settle(tm)
	if !ok {
		misses = append(misses, fmt.Sprintf("the fleet packed with steering off did not settle within %s", tm.Timeout+tm.Settle))
	}
	var packed *Cost
	if pods, err := livePods(s.Ctx, b.Env.Client, s.Namespace); ok && err == nil {
		packed = fleetCost(win.TL, pods, cat, bounded)
		figures["packedFleetHourly"], figures["packedRatio"] = packed.FleetHourly, packed.Ratio
	}

	restarted := time.Now()
	if ok {
		b.RestartOutside(t, With(QuotaKnown, map[string]string{"COST_REPLACEMENT_MIN_NODE_AGE": "1s"}))
		// Drift replaces one node per command, each waiting for its replacements to initialize:
		// a fleet of many ill-shaped nodes takes longer than consolidation to settle.
		replacing := tm
		replacing.Settle *= 2
		if run.settleSince(restarted, replacing) {
			win.TL.Read(func(tl *Timeline) {
				figures["replacedSettledSeconds"] = round3(max(0, tl.lastFleetChange.Sub(restarted).Seconds()))
			})
		} else {
			misses = append(misses, fmt.Sprintf("the fleet did not settle within %s of the replacement's start", replacing.Settle))
		}
	}
	r := win.Close(fmt.Sprintf("cost-%s-replacement", w.Name),
		fmt.Sprintf("%d pods, %s (%s), one Deployment per shape, quota lifted and known, node daemons %s/%s on every node, consolidation after %s; packed with cost steering off and settled, then the controller restarted as shipped with COST_REPLACEMENT_MIN_NODE_AGE=1s and settled again (every pod Running and no NodeClaim/NodeGroup change for %s)",
			total, w.Name, w.Note, NodeDaemons.CPU, NodeDaemons.Mem, tm.ConsolidateAfter, tm.Quiet))
	r.Env = map[string]string{"COST_REPLACEMENT_MIN_NODE_AGE": "1s"}
	for k, v := range figures {
		r.Figures[k] = v
	}
	r.Misses = append(r.Misses, misses...)
	win.TL.Read(func(tl *Timeline) {
		deleted, launched, again := 0, 0, 0
		for _, g := range tl.Groups {
			if !g.Managed || g.Created.IsZero() {
				continue
			}
			if g.Created.After(restarted) {
				launched++
				if !g.Deleting.IsZero() {
					again++
				}
			} else if !g.Deleting.IsZero() && g.Deleting.After(restarted) {
				deleted++
			}
		}
		r.Figures["nodeGroupsReplaced"] = float64(deleted)
		r.Figures["nodeGroupsLaunchedByReplacement"] = float64(launched)
		r.Figures["nodeGroupsReplacedTwice"] = float64(again)
	})
	run.finish(t, b, r)
	for _, m := range r.Misses {
		t.Logf("%s: %s", r.Name, m)
	}
	if packed != nil && r.Cost != nil {
		t.Logf("%s: packed %.4f €/h %v (%.3f × bound), after replacement %.4f €/h %v (%.3f × bound, bound %.4f €/h %v); %v NodeGroups replaced by %v, %v of those deleted again; settled %vs after the restart",
			r.Name, packed.FleetHourly, packed.Fleet, packed.Ratio, r.Cost.FleetHourly, r.Cost.Fleet, r.Cost.Ratio, r.Cost.Bound.CostHourly, r.Cost.Bound.Fleet,
			r.Figures["nodeGroupsReplaced"], r.Figures["nodeGroupsLaunchedByReplacement"], r.Figures["nodeGroupsReplacedTwice"], r.Figures["replacedSettledSeconds"])
		m := "cost replacement, " + w.Name
		clean := len(r.Misses) == 0
		b.Check(m+": settled fleet after the replacement vs packed", "after ≤ packed", r.Name,
			fmt.Sprintf("%.4f €/h (%.3f × bound) from %.4f €/h (%.3f ×)", r.Cost.FleetHourly, r.Cost.Ratio, packed.FleetHourly, packed.Ratio),
			clean && r.Cost.FleetHourly <= packed.FleetHourly+1e-9)
		b.Check(m+": nodes the replacement launched and deleted again", "0", r.Name,
			fmt.Sprintf("%.0f of %.0f", r.Figures["nodeGroupsReplacedTwice"], r.Figures["nodeGroupsLaunchedByReplacement"]),
			clean && r.Figures["nodeGroupsReplacedTwice"] == 0)
	} else {
		b.Unmeasured("cost replacement, "+w.Name, "after ≤ packed", r.Name, "a fleet was not priced")
	}
	return r
}
