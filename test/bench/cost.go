package bench

import (
	"math"
	"sort"
)

// FlavorCost is what the cost bound knows of a flavor: its allocatable resources (what pods
// can request on its node) and its hourly price.
type FlavorCost struct {
	Name        string  `json:"name"`
	CPUMilli    int64   `json:"cpuMilli"`
	MemoryBytes int64   `json:"memoryBytes"`
	Pods        int64   `json:"pods"`
	PriceHourly float64 `json:"priceHourly"`
}

// Bound is the cheapest fleet that could possibly hold a set of pods.
type Bound struct {
	// CostHourly is the bound. When Exact, it is the cheapest multiset of flavors whose summed
	// allocatable CPU, memory and pod slots cover the pods' summed requests (bin-packing
	// fragmentation ignored, so no real fleet can be cheaper). When not Exact (the search
	// budget ran out), it is the weaker per-resource bound: max over CPU, memory and pods of
	// demand × the cheapest price per unit of that resource.
	CostHourly float64        `json:"costHourly"`
	Fleet      map[string]int `json:"fleet,omitempty"`
	Exact      bool           `json:"exact"`
}

// LowerBound solves min Σ price·x subject to Σ alloc·x ≥ demand (CPU, memory, pods), x ∈ ℕ⁶,
// by depth-first branch and bound over the flavors, largest first; the prune bound is the
// per-resource bound of what remains.
func LowerBound(flavors []FlavorCost, cpuMilli, memBytes, pods int64) Bound {
	fs := append([]FlavorCost(nil), flavors...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].PriceHourly > fs[j].PriceHourly })
	n := len(fs)
	if n == 0 || (cpuMilli <= 0 && memBytes <= 0 && pods <= 0) {
		return Bound{Exact: true, Fleet: map[string]int{}}
	}
	// unit[i][d]: the cheapest price per unit of resource d among flavors i.. (suffix).
	unit := make([][3]float64, n+1)
	unit[n] = [3]float64{math.Inf(1), math.Inf(1), math.Inf(1)}
	for i := n - 1; i >= 0; i-- {
		f := fs[i]
		unit[i] = unit[i+1]
		for d, a := range [3]int64{f.CPUMilli, f.MemoryBytes, f.Pods} {
			if a > 0 {
				unit[i][d] = math.Min(unit[i][d], f.PriceHourly/float64(a))
			}
		}
	}
	lb := func(i int, rem [3]int64) float64 {
		b := 0.0
		for d := range rem {
			if rem[d] > 0 {
				b = math.Max(b, float64(rem[d])*unit[i][d])
			}
		}
		return b
	}
	need := func(f FlavorCost, rem [3]int64) int64 {
		var k int64
		for d, a := range [3]int64{f.CPUMilli, f.MemoryBytes, f.Pods} {
			if rem[d] <= 0 {
				continue
			}
			if a <= 0 {
				return -1
			}
			k = max(k, (rem[d]+a-1)/a)
		}
		return k
	}
	demand := [3]int64{cpuMilli, memBytes, pods}
	best := math.Inf(1)
	var bestX []int64
	x := make([]int64, n)
	steps, budget := 0, 20_000_000
	var dfs func(i int, rem [3]int64, cost float64)
	dfs = func(i int, rem [3]int64, cost float64) {
		steps++
		if steps > budget {
			return
		}
		if rem[0] <= 0 && rem[1] <= 0 && rem[2] <= 0 {
			if cost < best-1e-12 {
				best = cost
				bestX = append([]int64(nil), x...)
			}
			return
		}
		if i == n || cost+lb(i, rem) >= best-1e-12 {
			return
		}
		f := fs[i]
		k := need(f, rem)
		if k < 0 {
			k = 0
		}
		if i == n-1 {
			if need(f, rem) < 0 {
				return
			}
			x[i] = k
			dfs(n, sub(rem, f, k), cost+float64(k)*f.PriceHourly)
			x[i] = 0
			return
		}
		for c := k; c >= 0; c-- {
			x[i] = c
			dfs(i+1, sub(rem, f, c), cost+float64(c)*f.PriceHourly)
			if steps > budget {
				break
			}
		}
		x[i] = 0
	}
	dfs(0, demand, 0)
	if steps > budget || bestX == nil {
		return Bound{CostHourly: lb(0, demand), Exact: false}
	}
	fleet := map[string]int{}
	for i, c := range bestX {
		if c > 0 {
			fleet[fs[i].Name] = int(c)
		}
	}
	return Bound{CostHourly: best, Fleet: fleet, Exact: true}
}

func sub(rem [3]int64, f FlavorCost, k int64) [3]int64 {
	rem[0] -= k * f.CPUMilli
	rem[1] -= k * f.MemoryBytes
	rem[2] -= k * f.Pods
	return rem
}
