package steering_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/steering"
)

const (
	gi  = int64(1) << 30
	ki  = int64(1) << 10
	mi  = int64(1) << 20
	pod = 110
)

// catalogue is CKE's six flavors: quota size, price (the embedded catalogue's per-vCPU and
// per-GB rates) and allocatable (memory seen by the kernel of the
// Kubernetes 1.37 node image, minus 100Mi).
func catalogue() []steering.Flavor {
	flavor := func(name string, cpu, gb, memKi int64) steering.Flavor {
		return steering.Flavor{Name: name, Size: quota.Usage{CPU: cpu, GB: gb},
			Allocatable: steering.Demand{MilliCPU: cpu * 1000, Memory: memKi*ki - 100*mi}, Pods: pod,
			Price: float64(cpu)*0.00278 + float64(gb)*0.00556}
	}
	return []steering.Flavor{
		flavor("2XS", 4, 4, 3715344), flavor("XS", 6, 8, 7553664), flavor("S", 8, 12, 11385832),
		flavor("M", 10, 16, 15229256), flavor("L", 12, 24, 22896304), flavor("XL", 16, 32, 30584176),
	}
}

func pods(n int, milliCPU, memory int64) []steering.Demand {
	out := make([]steering.Demand, n)
	for i := range out {
		out[i] = steering.Demand{MilliCPU: milliCPU, Memory: memory}
	}
	return out
}

func TestSteer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		headroom quota.Usage
		pending  []steering.Demand
		overhead steering.Demand
		want     []string
	}{
		{
			// 40 / 40 with two S control-plane nodes: an M would take every GB and hold ten;
			// four 2XS (three each) or two XS (six each) hold all twelve.
			name: "the 12-pod episode", headroom: quota.Usage{CPU: 24, GB: 16},
			pending: pods(12, 1000, gi), want: []string{"2XS", "XS"},
		},
		{
			name: "ample headroom: no steering", headroom: quota.Usage{CPU: 100, GB: 100},
			pending: pods(12, 1000, gi),
		},
		{
			name: "few pods, every fitting flavor holds them all", headroom: quota.Usage{CPU: 24, GB: 16},
			pending: pods(3, 1000, gi),
		},
		{
			name: "nothing pending", headroom: quota.Usage{CPU: 24, GB: 16},
		},
		{
			name: "nothing fits the headroom", headroom: quota.Usage{CPU: 2, GB: 2},
			pending: pods(12, 1000, gi),
		},
		{
			// Only an M or larger holds a 9 CPU pod, and an M fits the headroom: Karpenter
			// finds it alone; hiding the other flavors would win nothing.
			name: "a pod only a larger flavor holds, within the headroom", headroom: quota.Usage{CPU: 24, GB: 16},
			pending: pods(1, 9000, 10*gi),
		},
		{
			// A node of its own for every pod fits the headroom (examples/min-values.yaml
			// with a raised quota): steering would only break the pool's minValues.
			name: "every pod could have its own node", headroom: quota.Usage{CPU: 150, GB: 140},
			pending: append(pods(1, 9000, gi), pods(3, 1000, gi)...),
		},
		{
			// Ten 1 CPU pods and a 9 CPU one against 24 / 16: one M holds the large pod and
			// takes every GB, 2XS or XS nodes would hold the ten others.
			name: "binding headroom, mixed pods", headroom: quota.Usage{CPU: 24, GB: 16},
			pending: append(pods(1, 9000, gi), pods(10, 1000, gi)...), want: []string{"2XS", "XS"},
		},
		{
			// Daemon sets take 1 CPU per node: a 2XS holds three 1 CPU pods, an XS five.
			name: "daemon-set overhead counts per node", headroom: quota.Usage{CPU: 24, GB: 16},
			pending: pods(12, 1000, gi), overhead: steering.Demand{MilliCPU: 1000, Memory: 200 * mi},
			want: []string{"2XS"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(steering.ForQuota(tc.headroom, catalogue(), tc.pending, tc.overhead)).To(Equal(tc.want))
		})
	}
}

// Against a provisional limit (the quota not known yet), launching within its headroom is
// preferred to probing beyond it whenever the headroom holds every pending pod: a refused
// probe's reservation may stay held upstream for minutes.
func TestSteerWithin(t *testing.T) {
	for _, tc := range []struct {
		name     string
		headroom quota.Usage
		pending  []steering.Demand
		want     []string
	}{
		{
			// The 12-pod episode, quota not configured: left alone Karpenter packs all twelve
			// onto an L or XL, beyond CKE's default; four 2XS or two XS hold them within it.
			name: "the 12-pod episode", headroom: quota.Usage{CPU: 24, GB: 16},
			pending: pods(12, 1000, gi), want: []string{"2XS", "XS"},
		},
		{
			name: "loose headroom: every flavor within it", headroom: quota.Usage{CPU: 24, GB: 16},
			pending: pods(3, 1000, gi), want: []string{"2XS", "XS", "S", "M"},
		},
		{
			// Only an XL holds it, and an XL does not fit: the probe may find a raised quota.
			name: "a pod the headroom cannot hold", headroom: quota.Usage{CPU: 24, GB: 16},
			pending: append(pods(1, 13000, gi), pods(2, 1000, gi)...),
		},
		{
			// Twenty 1 CPU pods need more than 24 / 16 holds: probing is the way.
			name: "more pods than the headroom holds", headroom: quota.Usage{CPU: 24, GB: 16},
			pending: pods(20, 1000, gi),
		},
		{
			name: "nothing pending", headroom: quota.Usage{CPU: 24, GB: 16},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(steering.WithinProvisional(tc.headroom, catalogue(), tc.pending, steering.Demand{})).To(Equal(tc.want))
		})
	}
}
