package steering

import (
	"cmp"
	"slices"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// NodeCountTolerance is how much dearer, as a fraction of the cheapest, an offer may be and
// still win for launching fewer nodes.
const NodeCountTolerance = 0.01

// Pod is a pending pod as cost steering sees it: what it requests and, when its node selector
// or required node affinity rules flavors out, the flavors it may run on.
type Pod struct {
	Demand
	// Allowed names the flavors the pod may run on; nil when any.
	Allowed []string
}

func (p Pod) allows(name string) bool { return p.Allowed == nil || slices.Contains(p.Allowed, name) }

// Fleet is what a packing of the pending pods is expected to launch.
type Fleet struct {
	Nodes int
	// Hourly is the fleet's price per hour.
	Hourly float64
	// Size is what the fleet's nodes charge to the quota.
	Size quota.Usage
}

// Cost chooses the flavors to offer so that Karpenter's packing of the pending pods yields the
// cheapest fleet it can, and returns nil when offering every flavor is as cheap.
//
// Why it is needed: core fills each node it plans until only the largest offered flavors can
// hold it, then launches the cheapest of those. On CKE the large flavors carry more memory per
// vCPU than the small ones, so many small CPU-leaning pods become a few large nodes whose
// memory is paid for and idle. Offering only the flavors up to a cap changes what "full"
// means: nodes are filled to the cap's shape instead.
//
// How: for each flavor c, the candidate offer is every flavor no larger than c, plus, for a
// pod none of those can hold (or that its requirements keep off them), the cheapest flavor
// that holds it: a flavor a pod needs is never hidden. Each candidate is priced by packing the
// pods as core does (largest first, each pod onto an open node some offered flavor still
// holds, else onto a new node; each node launched as the cheapest flavor that holds it), with
// the daemon sets' overhead on every node. Of the candidates within NodeCountTolerance of the
// cheapest, the one with the fewest nodes wins; it is returned only when it costs less than
// offering everything.
func Cost(flavors []Flavor, pods []Pod, overhead Demand) (keep []string, steered, unsteered Fleet) {
	var plannable []Pod
	for _, p := range pods {
		if cheapestHolding(flavors, p, overhead, nil) >= 0 {
			plannable = append(plannable, p)
		}
	}
	if len(plannable) == 0 {
		return nil, Fleet{}, Fleet{}
	}
	slices.SortStableFunc(plannable, coreOrder)
	all := make([]bool, len(flavors))
	for i := range all {
		all[i] = true
	}
	unsteered = plan(flavors, all, plannable, overhead)
	type candidate struct {
		offer []bool
		fleet Fleet
	}
	var candidates []candidate
	cheapest := unsteered.Hourly
	pinned := slices.ContainsFunc(plannable, func(p Pod) bool { return p.Allowed != nil })
	for c := range flavors {
		offer := capped(flavors, c, plannable, overhead)
		if offer == nil || (!pinned && offersLargest(flavors, offer)) {
			continue
		}
		f := plan(flavors, offer, plannable, overhead)
		candidates = append(candidates, candidate{offer, f})
		cheapest = min(cheapest, f.Hourly)
	}
	// Among the offers within NodeCountTolerance of the cheapest, the fewest nodes: each node
	// is one more launch for core's queue, one more join to wait for and one more set of
	// daemons to pay, and a scale-out with many more nodes is slower for a saving below it.
	var best []bool
	var bestFleet Fleet
	for _, c := range candidates {
		if c.fleet.Hourly >= unsteered.Hourly-1e-9 || c.fleet.Hourly > cheapest*(1+NodeCountTolerance)+1e-9 {
			continue
		}
		if best == nil || c.fleet.Nodes < bestFleet.Nodes || (c.fleet.Nodes == bestFleet.Nodes && c.fleet.Hourly < bestFleet.Hourly) {
			best, bestFleet = c.offer, c.fleet
		}
	}
	if best == nil || slices.Equal(best, all) {
		return nil, unsteered, unsteered
	}
	for i, f := range flavors {
		if best[i] {
			keep = append(keep, f.Name)
		}
	}
	return keep, bestFleet, unsteered
}

// coreOrder is the order core's scheduler takes pods in: CPU first, then memory, largest
// first.
func coreOrder(a, b Pod) int {
	return cmp.Or(cmp.Compare(b.MilliCPU, a.MilliCPU), cmp.Compare(b.Memory, a.Memory))
}

// capped is the offer of every flavor no larger than flavors[c] (in allocatable CPU and
// memory), plus the cheapest flavor holding each pod those leave without one. Nil when c
// holds nothing (its allocatable does not cover the overhead).
func capped(flavors []Flavor, c int, pods []Pod, overhead Demand) []bool {
	capRoom := flavors[c].Allocatable.sub(overhead)
	if capRoom.MilliCPU <= 0 || capRoom.Memory <= 0 {
		return nil
	}
	offer := make([]bool, len(flavors))
	for i, f := range flavors {
		offer[i] = f.Allocatable.fits(flavors[c].Allocatable)
	}
	cover(flavors, offer, pods, overhead)
	return offer
}

// offersLargest says whether offer holds a flavor at least as large as every other (in
// allocatable CPU, memory and pods). With it offered (a pending pod needs it), core fills each
// node up to it whatever else is offered, so for pods that may run on any flavor the packing
// is the one every flavor gives, and the launch's choice among fewer flavors costs no less:
// the candidate cannot win, and is not planned. It spares a look at a burst with one large pod
// in it (hundreds of nodes to plan) most of its work.
func offersLargest(flavors []Flavor, offer []bool) bool {
	for i, f := range flavors {
		if !offer[i] {
			continue
		}
		largest := true
		for _, g := range flavors {
			if !g.Allocatable.fits(f.Allocatable) || (f.Pods > 0 && (g.Pods <= 0 || g.Pods > f.Pods)) {
				largest = false
				break
			}
		}
		if largest {
			return true
		}
	}
	return false
}

// cover adds to offer, for each pod that no offered flavor holds or that its requirements keep
// off them, the cheapest flavor that it may run on and that holds it, when one exists.
func cover(flavors []Flavor, offer []bool, pods []Pod, overhead Demand) {
	for _, p := range pods {
		if cheapestHolding(flavors, p, overhead, offer) >= 0 {
			continue
		}
		if i := cheapestHolding(flavors, p, overhead, nil); i >= 0 {
			offer[i] = true
		}
	}
}

// cheapestHolding is the index of the cheapest flavor (among offer, all when nil) that the pod
// may run on and whose node holds it beside the overhead; -1 when none.
func cheapestHolding(flavors []Flavor, p Pod, overhead Demand, offer []bool) int {
	best := -1
	for i, f := range flavors {
		if (offer != nil && !offer[i]) || !p.allows(f.Name) || !p.Demand.fits(f.Allocatable.sub(overhead)) {
			continue
		}
		if best < 0 || f.Price < flavors[best].Price {
			best = i
		}
	}
	return best
}

// planned is a node the packing opened: what its pods request and the offered flavors that
// still hold them all.
type planned struct {
	used  Demand
	pods  int64
	types []int
}

// plan places the pods (sorted largest first) as core's scheduler does and prices the nodes.
// A pod goes onto the open node with the fewest pods that some offered flavor it may run on
// still holds with it, else onto a new node whose types are the offered flavors holding it.
// Each node is then the cheapest of its remaining types.
func plan(flavors []Flavor, offer []bool, pods []Pod, overhead Demand) Fleet {
	var nodes []*planned
	fitsOn := func(i int, used Demand, n int64) bool {
		f := flavors[i]
		return used.fits(f.Allocatable.sub(overhead)) && (f.Pods <= 0 || n <= f.Pods)
	}
	for _, p := range pods {
		placed := false
		slices.SortStableFunc(nodes, func(a, b *planned) int { return cmp.Compare(a.pods, b.pods) })
		for _, n := range nodes {
			used := Demand{n.used.MilliCPU + p.MilliCPU, n.used.Memory + p.Memory}
			var still []int
			for _, i := range n.types {
				if p.allows(flavors[i].Name) && fitsOn(i, used, n.pods+1) {
					still = append(still, i)
				}
			}
			if len(still) > 0 {
				n.used, n.pods, n.types, placed = used, n.pods+1, still, true
				break
			}
		}
		if placed {
			continue
		}
		n := &planned{used: p.Demand, pods: 1}
		for i := range flavors {
			if offer[i] && p.allows(flavors[i].Name) && fitsOn(i, p.Demand, 1) {
				n.types = append(n.types, i)
			}
		}
		if len(n.types) > 0 {
			nodes = append(nodes, n)
		}
	}
	var fleet Fleet
	for _, n := range nodes {
		cheapest := n.types[0]
		for _, i := range n.types[1:] {
			if flavors[i].Price < flavors[cheapest].Price {
				cheapest = i
			}
		}
		fleet.Nodes++
		fleet.Hourly += flavors[cheapest].Price
		fleet.Size = fleet.Size.Add(flavors[cheapest].Size)
	}
	return fleet
}
