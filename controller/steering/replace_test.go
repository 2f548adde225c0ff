package steering_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/steering"
)

func price(name string) float64 {
	for _, f := range catalogue() {
		if f.Name == name {
			return f.Price
		}
	}
	panic("no flavor " + name)
}

func TestReplace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pods  []steering.Pod
		price float64
		// want is whether the node is replaced for its shape.
		want bool
	}{
		{name: "an XL full of CPU-heavy pods: 2XS hold them for far less", pods: uniform(15, 1000, 512*mi), price: price("XL"), want: true},
		{name: "an XL full of 1.25 GB per vCPU pods: smaller shapes hold them for less", pods: mixed(60), price: price("XL"), want: true},
		{name: "an XL full of memory-heavy pods: its own shape", pods: uniform(9, 1000, 3*gi), price: price("XL"), want: false},
		{name: "an M whose pods one 2XS holds: core's consolidation replaces it, not the provider", pods: uniform(2, 1000, gi), price: price("M"), want: false},
		{name: "an empty node: core's emptiness", pods: nil, price: price("XL"), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fleet, replace := steering.Replace(catalogue(), tc.pods, daemons, tc.price)
			g.Expect(replace).To(Equal(tc.want), "replacement fleet %+v for a node of %.4f €/h", fleet, tc.price)
			if replace {
				g.Expect(fleet.Hourly).To(BeNumerically("<=", tc.price*(1-steering.ReplaceSaving)), "the replacement saves at least ReplaceSaving")
				g.Expect(fleet.Nodes).To(BeNumerically(">", 1), "a split: one cheaper node is core's consolidation")
				t.Logf("replaced by %d nodes, %.4f €/h for %.4f €/h, %v", fleet.Nodes, fleet.Hourly, tc.price, fleet.Size)
			}
		})
	}
}

// A saving within ReplaceSaving moves no pod: the same pods on a node priced just above what
// their steered fleet costs are left alone, and replaced once the node costs enough more.
func TestReplaceNeedsTheSaving(t *testing.T) {
	g := NewWithT(t)
	pods := uniform(15, 1000, 512*mi)
	fleet, ok := steering.Replace(catalogue(), pods, daemons, price("XL"))
	g.Expect(ok).To(BeTrue())
	_, ok = steering.Replace(catalogue(), pods, daemons, fleet.Hourly/(1-steering.ReplaceSaving/2))
	g.Expect(ok).To(BeFalse(), "a saving of half ReplaceSaving")
	_, ok = steering.Replace(catalogue(), pods, daemons, fleet.Hourly/(1-steering.ReplaceSaving)+1e-6)
	g.Expect(ok).To(BeTrue(), "a saving of ReplaceSaving")
}
