package steering

import (
	"cmp"
	"slices"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// ForQuota chooses, when the quota binds, the flavors that let the headroom hold the most of the
// pending pods. For each flavor that fits the headroom it fills the headroom with nodes of that
// flavor alone (as many as the headroom and the pending pods call for), each node offering its
// allocatable minus overhead (the daemon sets' requests), and counts the pending pods those
// nodes hold. It returns the flavors that hold the most, or nil when every fitting flavor holds
// as many (the headroom does not bind, or the choice does not matter) or none holds any.
//
// The case it exists for: 40 vCPU / 40 GB with 16 / 24 used, twelve 1 CPU / 1Gi pods. Left to
// itself Karpenter packs ten of them onto an M (10 vCPU / 16 GB) that takes every GB left and
// strands 14 vCPU; four 2XS (three pods each) or two XS (six each) hold all twelve.
func ForQuota(headroom quota.Usage, flavors []Flavor, pending []Demand, overhead Demand) []string {
	if len(pending) == 0 || !binds(headroom, flavors, pending, overhead) {
		return nil
	}
	held, fitting, best := holds(headroom, flavors, pending, overhead)
	if fitting == 0 || best == 0 {
		return nil
	}
	var out []string
	for i, f := range flavors {
		if held[i] == best {
			out = append(out, f.Name)
		}
	}
	if len(out) == fitting {
		return nil
	}
	return out
}

// WithinProvisional is steering against a provisional limit (the quota not known yet): when the
// headroom it leaves can hold every pending pod, it returns the flavors that do so — every
// flavor that fits the headroom when it does not bind, else those whose nodes alone hold all
// the pods — so Karpenter launches within it instead of probing the quota with a larger
// flavor. A refused probe is not free: the quota engine may keep its reservation for minutes,
// which, the probe having overflowed the headroom, takes all of it. It
// returns nil when the pods need more than the headroom holds: probing is then the way to
// learn whether the quota was raised.
func WithinProvisional(headroom quota.Usage, flavors []Flavor, pending []Demand, overhead Demand) []string {
	if len(pending) == 0 {
		return nil
	}
	held, fitting, best := holds(headroom, flavors, pending, overhead)
	if fitting == 0 || best < len(pending) {
		return nil
	}
	loose := !binds(headroom, flavors, pending, overhead)
	var out []string
	for i, f := range flavors {
		if held[i] == best || (loose && held[i] >= 0) {
			out = append(out, f.Name)
		}
	}
	return out
}

// holds fills the headroom with nodes of each flavor alone (as many as the headroom and the
// pending pods call for) and counts the pending pods they hold: -1 for a flavor that does not
// fit the headroom. It also returns how many flavors fit and the most pods one holds.
func holds(headroom quota.Usage, flavors []Flavor, pending []Demand, overhead Demand) (held []int, fitting, best int) {
	pods := slices.Clone(pending)
	// Largest first, memory then CPU: first-fit decreasing packs within 22% of the best.
	slices.SortFunc(pods, func(a, b Demand) int {
		return cmp.Or(cmp.Compare(b.Memory, a.Memory), cmp.Compare(b.MilliCPU, a.MilliCPU))
	})
	held = make([]int, len(flavors))
	for i, f := range flavors {
		held[i] = -1
		if f.Size.CPU <= 0 || f.Size.GB <= 0 || !f.Size.FitsIn(headroom) {
			continue
		}
		nodes := min(headroom.CPU/f.Size.CPU, headroom.GB/f.Size.GB, int64(len(pods)))
		held[i] = pack(pods, int(nodes), f.Allocatable.sub(overhead), f.Pods)
		fitting++
		best = max(best, held[i])
	}
	return held, fitting, best
}

// binds says whether the headroom may be too small for the pending pods: it is not when every
// pod could have a node of its own, of the smallest flavor that holds it, within the headroom.
// Steering then has nothing to win, and hiding flavors would only narrow Karpenter's choice
// (a pool's minValues, a pod only a large flavor holds).
func binds(headroom quota.Usage, flavors []Flavor, pending []Demand, overhead Demand) bool {
	var need quota.Usage
	for _, p := range pending {
		if smallest := smallestFor(p, flavors, overhead); smallest >= 0 {
			need = need.Add(flavors[smallest].Size)
		}
	}
	return !need.FitsIn(headroom)
}

// smallestFor is the index of the smallest flavor (in quota) whose node holds the pod, -1
// when none does.
func smallestFor(p Demand, flavors []Flavor, overhead Demand) int {
	smallest := -1
	for i, f := range flavors {
		if f.Size.CPU <= 0 || f.Size.GB <= 0 || !p.fits(f.Allocatable.sub(overhead)) {
			continue
		}
		if smallest < 0 || f.Size.CPU+f.Size.GB < flavors[smallest].Size.CPU+flavors[smallest].Size.GB {
			smallest = i
		}
	}
	return smallest
}

// SmallestWanted is the quota size of the smallest flavor some pending pod can use: what a
// probe should ask for (quota.Tracker.ProbeAtMost). False when no flavor holds any pending pod.
func SmallestWanted(flavors []Flavor, pending []Demand, overhead Demand) (quota.Usage, bool) {
	var best quota.Usage
	found := false
	for _, p := range pending {
		if i := smallestFor(p, flavors, overhead); i >= 0 {
			if u := flavors[i].Size; !found || u.CPU+u.GB < best.CPU+best.GB {
				best, found = u, true
			}
		}
	}
	return best, found
}

// pack places pods first-fit onto that many identical nodes and returns how many it placed.
func pack(pods []Demand, nodes int, room Demand, maxPods int64) int {
	if nodes <= 0 || room.MilliCPU <= 0 || room.Memory <= 0 {
		return 0
	}
	if maxPods <= 0 {
		maxPods = int64(len(pods)) // not said: pods per node do not bind
	}
	free := make([]Demand, nodes)
	count := make([]int64, nodes)
	for i := range free {
		free[i] = room
	}
	placed := 0
	for _, p := range pods {
		for n := range free {
			if count[n] < maxPods && p.fits(free[n]) {
				free[n] = free[n].sub(p)
				count[n]++
				placed++
				break
			}
		}
	}
	return placed
}
