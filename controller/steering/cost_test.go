package steering_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/steering"
)

// mixed are the bench's 1000-pod scale-out: five shapes in turn, 240 vCPU and 300 GiB in all
// (1.25 GB per vCPU).
func mixed(n int) []steering.Pod {
	shapes := []steering.Demand{{100, 128 * mi}, {250, 256 * mi}, {500, 512 * mi}, {100, 512 * mi}, {250, 128 * mi}}
	out := make([]steering.Pod, n)
	for i := range out {
		out[i] = steering.Pod{Demand: shapes[i%len(shapes)]}
	}
	return out
}

func uniform(n int, milliCPU, memory int64) []steering.Pod {
	out := make([]steering.Pod, n)
	for i := range out {
		out[i] = steering.Pod{Demand: steering.Demand{MilliCPU: milliCPU, Memory: memory}}
	}
	return out
}

// daemons is a CKE node's daemon sets: 224Mi measured on a 2XS, and a CPU request assumed.
var daemons = steering.Demand{MilliCPU: 200, Memory: 224 * mi}

func TestCost(t *testing.T) {
	for _, tc := range []struct {
		name string
		pods []steering.Pod
		// keep is what cost steering offers; nil when it leaves every flavor.
		keep []string
	}{
		{name: "1.25 GB per vCPU: the XL's extra memory is idle, smaller shapes win", pods: mixed(1000), keep: []string{"2XS", "XS"}},
		{name: "CPU-heavy (0.5 GB per vCPU): the 2XS's shape", pods: uniform(200, 1000, 512*mi), keep: []string{"2XS"}},
		{name: "memory-heavy (3 GB per vCPU): the large flavors' shape, nothing hidden", pods: uniform(100, 500, 1536*mi), keep: nil},
		{name: "one pod: the cheapest flavor that holds it is launched anyway", pods: uniform(1, 100, 128*mi), keep: nil},
		{name: "nothing pending", pods: nil, keep: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			keep, steered, unsteered := steering.Cost(catalogue(), tc.pods, daemons)
			g.Expect(keep).To(Equal(tc.keep))
			if keep != nil {
				g.Expect(steered.Hourly).To(BeNumerically("<", unsteered.Hourly), "steering is chosen only when it is cheaper")
				t.Logf("steered %d nodes %.4f €/h, unsteered %d nodes %.4f €/h", steered.Nodes, steered.Hourly, unsteered.Nodes, unsteered.Hourly)
			}
		})
	}
}

// Of two offers less than NodeCountTolerance apart, the one with fewer nodes: eight 1-vCPU
// pods cost 4.00 on four A and 4.02 on two B; offering every flavor would launch one C at 4.50.
func TestCostPrefersFewerNodesWithinTheTolerance(t *testing.T) {
	g := NewWithT(t)
	flavor := func(name string, cpu int64, price float64) steering.Flavor {
		return steering.Flavor{Name: name, Allocatable: steering.Demand{MilliCPU: cpu * 1000, Memory: 64 * gi}, Pods: 110, Price: price}
	}
	flavors := []steering.Flavor{flavor("A", 2, 1.00), flavor("B", 4, 2.01), flavor("C", 8, 4.50)}
	keep, steered, unsteered := steering.Cost(flavors, uniform(8, 1000, gi), steering.Demand{})
	g.Expect(keep).To(Equal([]string{"A", "B"}))
	g.Expect(steered).To(Equal(steering.Fleet{Nodes: 2, Hourly: 4.02}))
	g.Expect(unsteered).To(Equal(steering.Fleet{Nodes: 1, Hourly: 4.50}))
}

// A flavor a pending pod needs is never hidden, whatever the others' shape: the pod too large
// for any small flavor, and the pod whose node selector allows only the XL.
func TestCostKeepsWhatAPodNeeds(t *testing.T) {
	g := NewWithT(t)
	big := steering.Pod{Demand: steering.Demand{MilliCPU: 1000, Memory: 28 * gi}}
	keep, _, _ := steering.Cost(catalogue(), append(mixed(200), big), daemons)
	g.Expect(keep).To(SatisfyAny(BeNil(), ContainElement("XL")), "the 28 GiB pod's XL")

	pinned := steering.Pod{Demand: steering.Demand{MilliCPU: 100, Memory: 128 * mi}, Allowed: []string{"XL"}}
	keep, _, _ = steering.Cost(catalogue(), append(uniform(200, 1000, 512*mi), pinned), daemons)
	// With the XL offered for it, core fills every node it plans up to an XL: nothing to win
	// this pass, and nothing is hidden.
	g.Expect(keep).To(SatisfyAny(BeNil(), ContainElement("XL")), "the pinned pod's XL")
}

// Every pending pod keeps a flavor that holds it and that it may run on, for any mix and
// whatever the quota says: a property of the whole policy over many batches.
func TestCostNeverStrandsAPod(t *testing.T) {
	g := NewWithT(t)
	flavors := catalogue()
	shapes := []steering.Demand{{100, 128 * mi}, {4000, 2 * gi}, {500, 6 * gi}, {250, 20 * gi}, {12000, 8 * gi}, {50, 64 * mi}}
	for seed := range 500 {
		var pods []steering.Pod
		for i := range 1 + seed%40 {
			p := steering.Pod{Demand: shapes[(seed*7+i*3)%len(shapes)]}
			if (seed+i)%11 == 0 {
				p.Allowed = []string{flavors[(seed+i)%len(flavors)].Name}
			}
			pods = append(pods, p)
		}
		keep := steering.Decide(steering.Input{Flavors: flavors, Pods: pods, PoolPods: pods, Overhead: daemons, Cost: seed%5 != 0,
			Quota: steering.QuotaView(seed % 3), Headroom: quota.Usage{CPU: int64(8 + seed%50), GB: int64(8 + seed%60)}}).Keep
		if keep == nil {
			continue
		}
		for _, p := range pods {
			holdsAny, keptHolds := false, false
			for _, f := range flavors {
				room := steering.Demand{MilliCPU: f.Allocatable.MilliCPU - daemons.MilliCPU, Memory: f.Allocatable.Memory - daemons.Memory}
				ok := p.MilliCPU <= room.MilliCPU && p.Memory <= room.Memory && (p.Allowed == nil || p.Allowed[0] == f.Name)
				holdsAny = holdsAny || ok
				keptHolds = keptHolds || (ok && containsName(keep, f.Name))
			}
			g.Expect(keptHolds || !holdsAny).To(BeTrue(), "seed %d: pod %+v left without a flavor by %v", seed, p, keep)
		}
	}
}

func containsName(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// The quota goes first; cost steering chooses within what it leaves, and the decision names
// the last concern that narrowed the offer.
func TestDecide(t *testing.T) {
	g := NewWithT(t)
	in := steering.Input{Flavors: catalogue(), Pods: mixed(1000), PoolPods: mixed(1000), Overhead: daemons, Cost: true}
	d := steering.Decide(in)
	g.Expect(d.Reason).To(Equal(steering.Cheapest))
	g.Expect(d.Keep).To(Equal([]string{"2XS", "XS"}))
	g.Expect(d.Hidden(catalogue())).To(Equal([]string{"S", "M", "L", "XL"}))

	in.Cost = false
	d = steering.Decide(in)
	g.Expect(d.Reason).To(Equal(steering.Unsteered), "cost steering off: today's behaviour")
	g.Expect(d.Keep).To(BeNil())

	// The 12-pod episode: the headroom binds and the quota's choice stands.
	in = steering.Input{Flavors: catalogue(), Pods: uniform(12, 1000, gi), PoolPods: uniform(12, 1000, gi), Overhead: steering.Demand{},
		Quota: steering.QuotaLimited, Headroom: quota.Usage{CPU: 24, GB: 16}, Cost: true}
	d = steering.Decide(in)
	g.Expect(d.Keep).NotTo(ContainElements("M", "L", "XL"))
	g.Expect(d.Reason).To(BeElementOf(steering.QuotaHeadroom, steering.Cheapest))
}

// What one decision costs the scheduling pass that waits on it: cost steering plans the
// pending pods once per candidate offer, on every look at them (at most every 2 s per pool).
func BenchmarkCost(b *testing.B) {
	for _, n := range []int{300, 1000, 5000} {
		pods := mixed(n)
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			for b.Loop() {
				steering.Cost(catalogue(), pods, daemons)
			}
		})
	}
	// A burst with pods that need the largest flavor: no candidate can win.
	large := append(append(uniform(500, 900, 3100*mi), uniform(100, 900, 450*mi)...), uniform(500, 3500, 28*gi)...)
	b.Run("pods=1100,with-large", func(b *testing.B) {
		for b.Loop() {
			steering.Cost(catalogue(), large, daemons)
		}
	})
}

// The offers Cost weighs (every flavor up to a cap) are as cheap, by the packing model, as any
// set of flavors that holds every pod: narrowing the candidates to caps loses nothing on the
// bench's workloads, two shapes in one batch included.
func TestCostIsAsCheapAsAnyOffer(t *testing.T) {
	var cpuHeavy, memHeavy, twoShapes []steering.Pod
	for i := range 300 {
		cpuHeavy = append(cpuHeavy, []steering.Pod{
			{Demand: steering.Demand{MilliCPU: 500, Memory: 256 * mi}}, {Demand: steering.Demand{MilliCPU: 1000, Memory: 512 * mi}},
			{Demand: steering.Demand{MilliCPU: 250, Memory: 128 * mi}}}[i%3])
		memHeavy = append(memHeavy, []steering.Pod{
			{Demand: steering.Demand{MilliCPU: 250, Memory: 768 * mi}}, {Demand: steering.Demand{MilliCPU: 500, Memory: 1536 * mi}},
			{Demand: steering.Demand{MilliCPU: 1000, Memory: 3 * gi}}}[i%3])
	}
	twoShapes = append(uniform(150, 1000, 512*mi), uniform(150, 250, 768*mi)...)
	// Core's do-not-disrupt performance test: pods that need an XL beside small ones, so that
	// every candidate holds the XL and none is planned (offersLargest).
	withLarge := append(append(uniform(100, 900, 3100*mi), uniform(20, 900, 450*mi)...), uniform(100, 3500, 28*gi)...)
	flavors := catalogue()
	for name, pods := range map[string][]steering.Pod{"mixed": mixed(300), "cpu-heavy": cpuHeavy, "memory-heavy": memHeavy, "two-shapes": twoShapes, "with-large": withLarge} {
		t.Run(name, func(t *testing.T) {
			sorted := slices.Clone(pods)
			slices.SortStableFunc(sorted, steering.CoreOrder)
			best, bestOffer := steering.Fleet{Hourly: math.Inf(1)}, []bool(nil)
			for mask := 1; mask < 1<<len(flavors); mask++ {
				offer := make([]bool, len(flavors))
				for i := range offer {
					offer[i] = mask&(1<<i) != 0
				}
				if !slices.ContainsFunc(pods, func(p steering.Pod) bool { return steering.CheapestHolding(flavors, p, daemons, offer) < 0 }) {
					if f := steering.Plan(flavors, offer, sorted, daemons); f.Hourly < best.Hourly {
						best, bestOffer = f, offer
					}
				}
			}
			_, steered, _ := steering.Cost(flavors, pods, daemons)
			if steered.Hourly > best.Hourly*(1+steering.NodeCountTolerance)+1e-9 {
				t.Errorf("Cost's offer costs %.4f €/h on %d nodes; offering %v costs %.4f on %d", steered.Hourly, steered.Nodes, bestOffer, best.Hourly, best.Nodes)
			}
		})
	}
}
