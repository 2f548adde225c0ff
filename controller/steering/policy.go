// Package steering is the provider's one steering policy: which of a NodePool's offered
// flavors Karpenter may use in a scheduling pass, decided from the pending pods. Karpenter core
// packs pods onto the flavors it is offered and launches the cheapest that holds each node it
// plans; hiding flavors (offering them as unavailable) is the only lever a provider has on that
// packing. Two concerns use it, in this order, and each decision carries the one reason it was
// made:
//
//   - the quota: when the organisation's quota binds, the flavors that let its headroom hold
//     the most pending pods (ForQuota); while the quota is not known, the flavors that hold
//     every pending pod within CKE's default (WithinProvisional);
//   - the bill: among what the quota leaves, the flavors whose packing yields the cheapest
//     fleet for the pending pods (Cost).
//
// The same packing model judges a running node (Replace): when its pods would cost much less
// on the nodes Cost offers them, the provider reports it drifted, and its pods are planned for
// with the pending ones until Karpenter's drift has replaced it.
//
// Nothing here reads the cluster: the caller (the cloud provider's offerings) gathers the
// pods and flavors and applies the decision.
package steering

import (
	"slices"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// Flavor is what steering needs to know of a flavor.
type Flavor struct {
	Name string
	// Size is what one node charges to the quota.
	Size quota.Usage
	// Allocatable is what one node offers pods.
	Allocatable Demand
	// Pods is how many pods one node runs at most.
	Pods int64
	// Price is what one node costs per hour.
	Price float64
}

// Demand is what a pod requests (or a node offers): millicores and bytes of memory.
type Demand struct {
	MilliCPU int64
	Memory   int64
}

func (d Demand) sub(o Demand) Demand { return Demand{d.MilliCPU - o.MilliCPU, d.Memory - o.Memory} }

func (d Demand) fits(room Demand) bool { return d.MilliCPU <= room.MilliCPU && d.Memory <= room.Memory }

// Reason is why a decision offers the flavors it does.
type Reason string

// The reasons, as the steering metric's reason label reports them.
const (
	// Unsteered: every offered flavor stays offered.
	Unsteered Reason = "none"
	// QuotaHeadroom: the quota's headroom binds; the flavors that hold the most pending pods in it.
	QuotaHeadroom Reason = "quota"
	// AssumedQuota: the quota is not known; the flavors that hold every pending pod within
	// the headroom CKE's default quota leaves, rather than a probe with a larger one.
	AssumedQuota Reason = "assumed-quota"
	// Cheapest: the flavors whose packing costs the least for the pending pods.
	Cheapest Reason = "cost"
)

// Reasons are every Reason, for metrics that report each one.
var Reasons = []Reason{Unsteered, QuotaHeadroom, AssumedQuota, Cheapest}

// QuotaView is what the quota says when steering decides.
type QuotaView int

const (
	// QuotaOpen: no limit is in force and none is assumed; the quota does not steer.
	QuotaOpen QuotaView = iota
	// QuotaLimited: a limit is known or configured; Headroom is what it leaves.
	QuotaLimited
	// QuotaAssumed: no limit is known and CKE's default is assumed; Headroom is what it leaves.
	QuotaAssumed
)

// Input is everything one decision is made from.
type Input struct {
	// Flavors are the pool's flavors offered as available (the quota's and the platform's
	// refusals already set aside).
	Flavors []Flavor
	// Pods are the pending pods: every one competes for the quota's headroom.
	Pods []Pod
	// PoolPods are the pending pods the NodePool can take: what its cost steering plans for.
	PoolPods []Pod
	// Overhead is what the daemon sets request on every node.
	Overhead Demand
	Quota    QuotaView
	Headroom quota.Usage
	// Cost turns cost steering on (settings.costSteering).
	Cost bool
}

// Decision is the flavors to keep offering, and why.
type Decision struct {
	// Keep are the flavors to keep offering; nil keeps every one.
	Keep   []string
	Reason Reason
	// Steered and Unsteered are the fleets cost steering expects with Keep and with every
	// flavor the quota leaves; zero when cost steering did not narrow the offer.
	Steered, Unsteered Fleet
}

// Hidden returns the offered flavors the decision sets aside.
func (d Decision) Hidden(flavors []Flavor) []string {
	if d.Keep == nil {
		return nil
	}
	var out []string
	for _, f := range flavors {
		if !slices.Contains(d.Keep, f.Name) {
			out = append(out, f.Name)
		}
	}
	return out
}

// Decide is the steering policy. The quota goes first: a pod the headroom cannot hold waits
// however cheap its flavor. Cost steering then chooses among the flavors the quota leaves; the
// decision's reason is the last concern that narrowed the offer. Whatever they choose, each
// pending pod keeps a flavor it may run on and that holds it, when one is offered at all.
func Decide(in Input) Decision {
	d := Decision{Reason: Unsteered}
	flavors := in.Flavors
	demands := make([]Demand, len(in.Pods))
	for i, p := range in.Pods {
		demands[i] = p.Demand
	}
	var keep []string
	switch in.Quota {
	case QuotaLimited:
		keep = ForQuota(in.Headroom, flavors, demands, in.Overhead)
		if keep != nil {
			d.Reason = QuotaHeadroom
		}
	case QuotaAssumed:
		keep = WithinProvisional(in.Headroom, flavors, demands, in.Overhead)
		if keep != nil && len(keep) < len(flavors) {
			d.Reason = AssumedQuota
		}
	}
	if keep != nil {
		flavors = slices.DeleteFunc(slices.Clone(flavors), func(f Flavor) bool { return !slices.Contains(keep, f.Name) })
	}
	if in.Cost {
		if cheaper, steered, unsteered := Cost(flavors, in.PoolPods, in.Overhead); cheaper != nil {
			keep, d.Reason = cheaper, Cheapest
			d.Steered, d.Unsteered = steered, unsteered
		}
	}
	if d.Reason != Unsteered {
		d.Keep = needed(keep, in.Flavors, in.PoolPods, in.Overhead)
	}
	return d
}

// needed returns keep with, for each pending pod that no kept flavor holds or that its
// requirements keep off them, the cheapest offered flavor that it may run on and that holds
// it: whatever a concern wants, no decision leaves a pod without a flavor it could use.
func needed(keep []string, flavors []Flavor, pods []Pod, overhead Demand) []string {
	offer := make([]bool, len(flavors))
	for i, f := range flavors {
		offer[i] = slices.Contains(keep, f.Name)
	}
	cover(flavors, offer, pods, overhead)
	var out []string
	for i, f := range flavors {
		if offer[i] {
			out = append(out, f.Name)
		}
	}
	return out
}
