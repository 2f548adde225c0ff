package steering

// ReplaceSaving is the least share of a node's price that the nodes replacing it must save
// for the node to be replaced for its shape. The packing model is core's, but kube-scheduler
// binds pods where they fit, not where core planned them, and a replacement pays for new
// nodes' joins and daemons before the old node goes: a saving within the model's error is no
// reason to move running pods.
const ReplaceSaving = 0.10

// Replace judges a running node for its shape: whether the pods it runs (those that would
// move, daemons aside) would cost less on the nodes cost steering offers them, at most
// (1 − ReplaceSaving) × price, where price is what the node costs per hour. It returns that
// fleet. A node that core's own consolidation can make cheaper (a single cheaper node holds
// its pods) is left to it: only a replacement that needs a narrowed offer, several smaller
// nodes where core would pick one, is the provider's to propose.
func Replace(flavors []Flavor, pods []Pod, overhead Demand, price float64) (Fleet, bool) {
	if len(pods) == 0 || price <= 0 {
		return Fleet{}, false
	}
	keep, steered, _ := Cost(flavors, pods, overhead)
	if keep == nil || steered.Nodes == 0 || steered.Hourly > price*(1-ReplaceSaving)+1e-9 {
		return Fleet{}, false
	}
	return steered, true
}
