package bench

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/steering"
)

// onePassFleet is what the cost steering offer launches, by the provider's packing model,
// when one scheduling pass plans every one of the pods with daemons on every node: the fleet
// Karpenter core builds from one offer of flavors for the whole workload.
//
// It is what the settled fleet has to be read beside. Core launches each node it plans as the
// cheapest flavor that holds what it packed, filling it up to the largest offered flavor, and
// consolidation never splits a node: when the bound mixes shapes (small CPU-rich nodes beside
// large memory-rich ones) that one offer cannot, a fleet gets below this figure only when
// passes that see different pods get different offers and consolidation merges what they
// leave, not by any one decision.
func onePassFleet(cat []FlavorCost, pods []corev1.Pod, daemons Shape) steering.Fleet {
	flavors := make([]steering.Flavor, len(cat))
	for i, f := range cat {
		flavors[i] = steering.Flavor{Name: f.Name, Allocatable: steering.Demand{MilliCPU: f.CPUMilli, Memory: f.MemoryBytes},
			Pods: f.Pods, Price: f.PriceHourly}
	}
	demands := make([]steering.Pod, len(pods))
	for i := range pods {
		// What the controller reads of a pending pod (core's own sum of its requests).
		r := resources.RequestsForPods(&pods[i])
		demands[i] = steering.Pod{Demand: steering.Demand{MilliCPU: r.Cpu().MilliValue(), Memory: r.Memory().Value()}}
	}
	cpu, mem := resource.MustParse(daemons.CPU), resource.MustParse(daemons.Mem)
	keep, steered, unsteered := steering.Cost(flavors, demands, steering.Demand{MilliCPU: cpu.MilliValue(), Memory: mem.Value()})
	if keep == nil {
		return unsteered
	}
	return steered
}
