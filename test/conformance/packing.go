package conformance

import (
	"errors"
	"fmt"
	"math"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
)

// The performance suite gates on the reserved CPU and memory utilisation of its nodes: each
// launched node's pod requests over its allocatable, averaged over the nodes. How high that
// average can go depends on the instance shapes as much as on the scheduler: CKE's six flavors
// have 4–16 vCPU and about 2 GB per vCPU, and a pod of 3.5 vCPU and 28 GiB fits only on XL, alone,
// using 22 % of its CPU. MaxUtilisation computes the highest average any placement of a phase's
// pods onto the catalogue's flavors can reach, which no scheduler can beat.

// PodShape is one of a phase's deployments: its pods' requests and how many there are.
type PodShape struct {
	Name     string
	CPU      string
	Memory   string
	Replicas int
	// OnePerNode: the deployment's pods repel each other (hostname anti-affinity).
	OnePerNode bool
}

// nodeShape is a flavor's allocatable, as Karpenter sees it from the catalogue.
type nodeShape struct {
	name         string
	cpu, mem     float64
	pods         int
	milli, memKi int64
}

// ckeCatalogue is the base catalogue as the provider builds it: the flavors the suites' pods
// land on.
func ckeCatalogue() (*catalog.Catalog, error) {
	base, err := catalog.LoadBase()
	if err != nil {
		return nil, fmt.Errorf("loading the base catalogue: %w", err)
	}
	cat, err := catalog.New(base, "par", nil, logr.Discard())
	if err != nil {
		return nil, fmt.Errorf("building the catalogue: %w", err)
	}
	return cat, nil
}

// catalogueShapes are the base catalogue's flavors with the allocatable Karpenter computes.
func catalogueShapes() ([]nodeShape, error) {
	cat, err := ckeCatalogue()
	if err != nil {
		return nil, err
	}
	var out []nodeShape
	for _, it := range cat.InstanceTypes() {
		a := it.Allocatable()
		cpu, mem, pods := a[corev1.ResourceCPU], a[corev1.ResourceMemory], a[corev1.ResourcePods]
		out = append(out, nodeShape{
			name: it.Name, cpu: cpu.AsApproximateFloat64(), mem: mem.AsApproximateFloat64(), pods: int(pods.Value()),
			milli: cpu.MilliValue(), memKi: mem.Value() / 1024,
		})
	}
	if len(out) == 0 {
		return nil, errors.New("the catalogue has no flavor")
	}
	return out, nil
}

// pattern is one way to fill a node: a flavor and how many pods of each shape.
type pattern struct {
	flavor   string
	counts   []int
	cpu, mem float64 // utilisation of the node
}

// patterns lists every non-empty way to fill each flavor with the shapes' pods.
func patterns(shapes []PodShape, nodes []nodeShape) ([]pattern, error) {
	type req struct{ milli, ki int64 }
	reqs := make([]req, len(shapes))
	for i, s := range shapes {
		c, err := resource.ParseQuantity(s.CPU)
		if err != nil {
			return nil, fmt.Errorf("shape %s cpu: %w", s.Name, err)
		}
		m, err := resource.ParseQuantity(s.Memory)
		if err != nil {
			return nil, fmt.Errorf("shape %s memory: %w", s.Name, err)
		}
		reqs[i] = req{c.MilliValue(), m.Value() / 1024}
	}
	var out []pattern
	for _, n := range nodes {
		counts := make([]int, len(shapes))
		var walk func(i int, milli, ki int64, pods int)
		walk = func(i int, milli, ki int64, pods int) {
			if i == len(shapes) {
				if pods == 0 {
					return
				}
				out = append(out, pattern{
					flavor: n.name, counts: append([]int(nil), counts...),
					cpu: float64(milli) / float64(n.milli), mem: float64(ki) / float64(n.memKi),
				})
				return
			}
			limit := shapes[i].Replicas
			if shapes[i].OnePerNode {
				limit = min(limit, 1)
			}
			for k := 0; k <= limit; k++ {
				m, q := milli+int64(k)*reqs[i].milli, ki+int64(k)*reqs[i].ki
				if m > n.milli || q > n.memKi || pods+k > n.pods {
					break
				}
				counts[i] = k
				walk(i+1, m, q, pods+k)
			}
			counts[i] = 0
		}
		walk(0, 0, 0, 0)
	}
	return out, nil
}

// Bound is the highest node-averaged utilisation a phase's pods can reach on the flavors.
type Bound struct {
	CPU, Memory float64
}

// MaxUtilisation is the optimum, over every placement of the shapes' pods onto nodes of the
// catalogue's flavors, of the average over nodes of each node's requested CPU (memory) over
// its allocatable: a linear-fractional programme over the ways to fill a node, solved as a
// linear one (Charnes–Cooper) with node counts allowed fractional, which can only raise the
// optimum. Spreading constraints other than one-per-node are left out, which can only raise it
// too: the result is an upper bound, not an estimate.
func MaxUtilisation(shapes []PodShape) (Bound, error) {
	nodes, err := catalogueShapes()
	if err != nil {
		return Bound{}, err
	}
	pats, err := patterns(shapes, nodes)
	if err != nil {
		return Bound{}, err
	}
	for i, s := range shapes {
		if s.Replicas == 0 {
			continue
		}
		if !anyPattern(pats, func(p pattern) bool { return p.counts[i] > 0 }) {
			return Bound{}, fmt.Errorf("no flavor fits a pod of %s (%s, %s)", s.Name, s.CPU, s.Memory)
		}
	}
	solve := func(util func(pattern) float64) (float64, error) {
		// Variables y_p (nodes of pattern p, scaled) and s (the scale); rows: for each shape,
		// Σ_p count·y_p − replicas·s = 0; then Σ_p y_p = 1. Maximise Σ_p util_p·y_p.
		nv := len(pats) + 1
		var a [][]float64
		var b []float64
		for i, s := range shapes {
			row := make([]float64, nv)
			for j, p := range pats {
				row[j] = float64(p.counts[i])
			}
			row[nv-1] = -float64(s.Replicas)
			a, b = append(a, row), append(b, 0)
		}
		row := make([]float64, nv)
		for j := range pats {
			row[j] = 1
		}
		a, b = append(a, row), append(b, 1)
		c := make([]float64, nv)
		for j, p := range pats {
			c[j] = util(p)
		}
		return maximise(a, b, c)
	}
	var out Bound
	if out.CPU, err = solve(func(p pattern) float64 { return p.cpu }); err != nil {
		return Bound{}, fmt.Errorf("CPU bound: %w", err)
	}
	if out.Memory, err = solve(func(p pattern) float64 { return p.mem }); err != nil {
		return Bound{}, fmt.Errorf("memory bound: %w", err)
	}
	return out, nil
}

func anyPattern(ps []pattern, f func(pattern) bool) bool {
	for _, p := range ps {
		if f(p) {
			return true
		}
	}
	return false
}

// maximise solves max c·x subject to A x = b, x ≥ 0, with b ≥ 0, by the two-phase simplex
// method on a dense tableau, Bland's rule (no cycling). The programmes here have a handful of
// rows and a few thousand columns.
func maximise(a [][]float64, b, c []float64) (float64, error) {
	const eps = 1e-9
	m, n := len(a), len(c)
	// Columns: n variables, m artificials, then the right-hand side.
	w := n + m + 1
	t := make([][]float64, m)
	basis := make([]int, m)
	for i := range a {
		if b[i] < 0 {
			return 0, errors.New("right-hand side must be non-negative")
		}
		t[i] = make([]float64, w)
		copy(t[i], a[i])
		t[i][n+i] = 1
		t[i][w-1] = b[i]
		basis[i] = n + i
	}
	pivot := func(r, col int) {
		p := t[r][col]
		for j := range t[r] {
			t[r][j] /= p
		}
		for i := range t {
			if i != r && t[i][col] != 0 {
				f := t[i][col]
				for j := range t[i] {
					t[i][j] -= f * t[r][j]
				}
			}
		}
		basis[r] = col
	}
	// run maximises obj over the columns allowed, from the current basis.
	run := func(obj []float64, allowed int) error {
		for iter := 0; iter < 100000; iter++ {
			// Reduced cost of column j: obj_j − Σ_i obj_basis(i)·t[i][j].
			enter := -1
			for j := 0; j < allowed; j++ {
				rc := obj[j]
				for i := range t {
					rc -= obj[basis[i]] * t[i][j]
				}
				if rc > eps {
					enter = j
					break
				}
			}
			if enter < 0 {
				return nil
			}
			leave, best := -1, math.Inf(1)
			for i := range t {
				if t[i][enter] > eps {
					ratio := t[i][w-1] / t[i][enter]
					if leave < 0 || ratio < best-eps || (math.Abs(ratio-best) <= eps && basis[i] < basis[leave]) {
						leave, best = i, ratio
					}
				}
			}
			if leave < 0 {
				return errors.New("unbounded")
			}
			pivot(leave, enter)
		}
		return errors.New("no convergence")
	}
	// Phase one: drive the artificials out (maximise −Σ artificials).
	phase1 := make([]float64, n+m)
	for i := n; i < n+m; i++ {
		phase1[i] = -1
	}
	if err := run(phase1, n+m); err != nil {
		return 0, fmt.Errorf("phase one: %w", err)
	}
	for i := range t {
		if basis[i] >= n && t[i][w-1] > 1e-7 {
			return 0, errors.New("infeasible")
		}
	}
	// An artificial left in the basis at zero is pivoted out on any real column.
	for i := range t {
		if basis[i] < n {
			continue
		}
		for j := 0; j < n; j++ {
			if math.Abs(t[i][j]) > eps {
				pivot(i, j)
				break
			}
		}
	}
	obj := make([]float64, n+m)
	copy(obj, c)
	if err := run(obj, n); err != nil {
		return 0, fmt.Errorf("phase two: %w", err)
	}
	v := 0.0
	for i := range t {
		v += obj[basis[i]] * t[i][w-1]
	}
	return v, nil
}
