package bench

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Workload is a cost scenario's pods: shapes cycled over n pods.
type Workload struct {
	Name   string
	Shapes []Shape
	// Note says what the shapes' memory per vCPU is.
	Note string
}

// CostWorkloads are the cost scenarios' workloads, by the pods' memory per vCPU: CKE's flavors
// run from 1 GB per vCPU (2XS) to 2 (L, XL), so each workload favours another shape.
var CostWorkloads = []Workload{
	{"mixed", ScaleShapes, "ScaleShapes: 1.25 GB per vCPU over the set"},
	{"cpu-heavy", []Shape{{"c1", 0, "500m", "256Mi"}, {"c2", 0, "1", "512Mi"}, {"c3", 0, "250m", "128Mi"}}, "0.5 GB per vCPU"},
	{"memory-heavy", []Shape{{"m1", 0, "250m", "768Mi"}, {"m2", 0, "500m", "1536Mi"}, {"m3", 0, "1", "3Gi"}}, "3 GB per vCPU"},
	{"two-shapes", []Shape{{"c", 0, "1", "512Mi"}, {"m", 0, "250m", "768Mi"}}, "half at 0.5 GB per vCPU, half at 3"},
}

// NodeDaemons is what a CKE node's daemon sets request: 224Mi of memory, measured on a 2XS
// (cke-platform.md §3); the CPU is an assumption (the platform document gives none): 100m.
var NodeDaemons = Shape{Name: "node-daemons", CPU: "100m", Mem: "224Mi"}

// DaemonNamespace holds the node daemons' DaemonSet, apart from the scenarios' namespaces so
// that their pods are no part of a scenario's demand: the bound counts them per node.
const DaemonNamespace = "bench-node-daemons"

// EnsureNodeDaemons runs NodeDaemons on every node, as a real CKE node runs its own, so that
// a fleet of many small nodes pays for what each node costs. Karpenter counts the DaemonSet
// in every node it plans; the provider's steering reads the daemon pods' requests.
func (b *Bench) EnsureNodeDaemons(ctx context.Context) error {
	c := b.Env.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DaemonNamespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", DaemonNamespace, err)
	}
	labels := map[string]string{"app": NodeDaemons.Name}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: NodeDaemons.Name, Namespace: DaemonNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name: "daemon", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse(NodeDaemons.CPU), corev1.ResourceMemory: resource.MustParse(NodeDaemons.Mem),
						}},
					}},
				},
			},
		},
	}
	if err := c.Create(ctx, ds); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the node daemons' DaemonSet: %w", err)
	}
	return nil
}

// RemoveNodeDaemons deletes the node daemons' namespace, DaemonSet and pods with it.
func (b *Bench) RemoveNodeDaemons(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DaemonNamespace}}
	if err := b.Env.Client.Delete(ctx, ns, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", DaemonNamespace, err)
	}
	return nil
}

// withOverhead is the catalogue with each flavor's allocatable less what every node's daemons
// request: what the pods of a scenario can use on a node of that flavor.
func withOverhead(cat []FlavorCost, d Shape) []FlavorCost {
	cpu, mem := resource.MustParse(d.CPU), resource.MustParse(d.Mem)
	out := make([]FlavorCost, len(cat))
	for i, f := range cat {
		f.CPUMilli -= cpu.MilliValue()
		f.MemoryBytes -= mem.Value()
		f.Pods--
		out[i] = f
	}
	return out
}

// CostSteering runs one workload of n pods (a Deployment per shape) on an open NodePool that
// consolidates after consolidateAfter, with cost steering on or off (the controller restarted
// with COST_STEERING), the quota lifted and known and the node daemons on every node. It
// prices the fleet when every pod first runs, then once it has settled (every pod Running and
// no NodeClaim or NodeGroup change for quiet, within settle), against the bound that counts the
// daemons per node; it reports how many NodeGroups were launched and the time to every pod
// Running.
func (b *Bench) CostSteering(t *testing.T, w Workload, n int, on bool, timeout, consolidateAfter, quiet, settle time.Duration) *Result {
	b.RestartOutside(t, With(QuotaKnown, map[string]string{"COST_STEERING": strconv.FormatBool(on)}))
	s, pool := b.setup(t, consolidateAfter)
	b.LiftQuota()
	cat, err := b.Catalogue()
	if err != nil {
		t.Fatal(err)
	}
	bounded := withOverhead(cat, NodeDaemons)
	win := b.Open(s)
	total := 0
	for i, sh := range w.Shapes {
		replicas := n / len(w.Shapes)
		if i < n%len(w.Shapes) {
			replicas++
		}
		total += replicas
		s.Deployment(sh.Name, pool.Name, int32(replicas), sh.CPU, sh.Mem)
	}
	ok := win.TL.WaitFor(s.Ctx, timeout, running(total))
	state := "off"
	if on {
		state = "on"
	}
	figures := map[string]float64{}
	var launch *Cost
	if ok {
		pods, err := livePods(s.Ctx, b.Env.Client, s.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		launch = boundedCost(win.TL, pods, cat, bounded)
		figures["launchFleetHourly"], figures["launchRatio"] = launch.FleetHourly, launch.Ratio
	}
	win.TL.Read(func(tl *Timeline) {
		var first, last time.Time
		for _, p := range tl.Pods {
			if first.IsZero() || p.Created.Before(first) {
				first = p.Created
			}
			if p.Running.After(last) {
				last = p.Running
			}
		}
		if !first.IsZero() && !last.IsZero() {
			figures["firstPodToAllRunningSeconds"] = round3(last.Sub(first).Seconds())
		}
	})
	settled := ok && win.TL.WaitFor(s.Ctx, settle, func(tl *Timeline) bool {
		return running(total)(tl) && time.Since(tl.lastFleetChange) >= quiet && tl.noneDeleting()
	})
	r := win.Close(fmt.Sprintf("cost-%s-steering-%s", w.Name, state),
		fmt.Sprintf("%d pods, %s (%s), one Deployment per shape, quota lifted and known, node daemons %s/%s on every node, consolidation after %s, cost steering %s; settled = every pod Running and no NodeClaim/NodeGroup change for %s",
			total, w.Name, w.Note, NodeDaemons.CPU, NodeDaemons.Mem, consolidateAfter, state, quiet))
	r.Env = map[string]string{"COST_STEERING": strconv.FormatBool(on)}
	maps.Copy(r.Figures, figures)
	win.TL.Read(func(tl *Timeline) {
		launched, replaced := 0, 0
		for _, g := range tl.Groups {
			if g.Managed && !g.Created.IsZero() {
				launched++
				if !g.Deleting.IsZero() {
					replaced++
				}
			}
		}
		r.Figures["nodeGroupsLaunched"] = float64(launched)
		r.Figures["nodeGroupsDeleted"] = float64(replaced)
	})
	switch {
	case !ok:
		win.TL.Read(func(tl *Timeline) {
			_, up := countRunning(tl)
			r.Misses = append(r.Misses, fmt.Sprintf("only %d of %d pods Running within %s", up, total, timeout))
		})
	case !settled:
		r.Misses = append(r.Misses, fmt.Sprintf("the fleet did not settle within %s", settle))
	}
	if pods, err := livePods(s.Ctx, b.Env.Client, s.Namespace); err == nil {
		r.Cost = boundedCost(win.TL, pods, cat, bounded)
		r.Notes = append(r.Notes, "bound: each node's allocatable less the node daemons' requests")
	} else {
		r.Notes = append(r.Notes, "cost: "+err.Error())
	}
	finish(s, r)
	b.Add(t, r)
	return r
}

// boundedCost is fleetCost with the bound taken over bounded (the catalogue less each node's
// daemons) instead of the catalogue.
func boundedCost(tl *Timeline, pods []corev1.Pod, cat, bounded []FlavorCost) *Cost {
	c := fleetCost(tl, pods, cat)
	cpu, mem := resource.MustParse(c.DemandCPU), resource.MustParse(c.DemandMemory)
	c.Bound = LowerBound(bounded, cpu.MilliValue(), mem.Value(), int64(len(pods)))
	c.Bound.CostHourly = round4(c.Bound.CostHourly)
	c.Ratio = 0
	if c.Bound.CostHourly > 0 {
		c.Ratio = round3(c.FleetHourly / c.Bound.CostHourly)
	}
	return c
}
