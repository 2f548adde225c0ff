package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Workload is a cost scenario's pods: shapes cycled over n pods.
type Workload struct {
	Name   string
	Shapes []Shape
	// Then, when set, is what each Deployment (one per Shapes entry, in order) rolls to once
	// every pod runs: a workload whose shape changes mid-run. The fleet is judged on the
	// rolled pods.
	Then []Shape
	// Pods, when set, is the workload's own pod count instead of the run's.
	Pods int
	// Note says what the shapes' memory per vCPU is.
	Note string
}

// CostWorkloads are the cost scenarios' workloads, by the pods' memory per vCPU: CKE's flavors
// run from 1 GB per vCPU (2XS) to 2 (L, XL), so each workload favours another shape.
var CostWorkloads = []Workload{
	{Name: "mixed", Shapes: ScaleShapes, Note: "ScaleShapes: 1.25 GB per vCPU over the set"},
	{Name: "cpu-heavy", Shapes: []Shape{{"c1", 0, "500m", "256Mi"}, {"c2", 0, "1", "512Mi"}, {"c3", 0, "250m", "128Mi"}}, Note: "0.5 GB per vCPU"},
	{Name: "memory-heavy", Shapes: []Shape{{"m1", 0, "250m", "768Mi"}, {"m2", 0, "500m", "1536Mi"}, {"m3", 0, "1", "3Gi"}}, Note: "3 GB per vCPU"},
	{Name: "two-shapes", Shapes: []Shape{{"c", 0, "1", "512Mi"}, {"m", 0, "250m", "768Mi"}}, Note: "half at 0.5 GB per vCPU, half at 3"},
	{Name: "shape-change", Shapes: []Shape{{"app", 0, "1", "512Mi"}}, Then: []Shape{{"app", 0, "250m", "768Mi"}},
		Note: "0.5 GB per vCPU, rolled out to 3 GB per vCPU once every pod runs"},
	{Name: "scale-out-1000", Shapes: ScaleShapes, Pods: 1000, Note: "ScaleShapes, 1000 pods: 1.25 GB per vCPU"},
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

// SteeringTiming is how a cost steering run waits: for every pod Running, then for the fleet
// to settle.
type SteeringTiming struct {
	// Timeout bounds the wait for every pod Running (each wave of a shape change).
	Timeout time.Duration
	// ConsolidateAfter is the NodePool's.
	ConsolidateAfter time.Duration
	// Quiet is how long no NodeClaim or NodeGroup may change for the fleet to count as
	// settled; Settle bounds the wait for it.
	Quiet, Settle time.Duration
}

// CostSteering runs one workload of n pods (a Deployment per shape; the workload's own count
// if it has one) on a NodePool open to every flavor, on-demand, that consolidates, with cost steering on or off (the
// controller restarted with COST_STEERING), the quota lifted and known and the node daemons on
// every node. A workload that changes shape rolls its Deployments out to the new shapes once
// every pod runs. It prices the fleet when every pod first runs, then once it has settled
// (every pod Running and no NodeClaim or NodeGroup change for the quiet window), against the
// bound that counts the daemons per node; it reports how many NodeGroups were launched and
// deleted and the time to every pod Running.
func (b *Bench) CostSteering(t *testing.T, w Workload, n int, on bool, tm SteeringTiming) *Result {
	env := map[string]string{"COST_STEERING": strconv.FormatBool(on)}
	if level := os.Getenv("BENCH_LOG_LEVEL"); level != "" {
		env["LOG_LEVEL"] = level // debug shows each steering decision (with BENCH_KEEP=1)
	}
	run := b.launchWorkload(t, w, n, tm, env)
	s, win, cat, bounded, deployments, total := run.s, run.win, run.cat, run.bounded, run.deployments, run.total
	ok := win.TL.WaitFor(s.Ctx, tm.Timeout, running(total))
	state := "off"
	if on {
		state = "on"
	}
	figures := map[string]float64{}
	if ok {
		pods, err := livePods(s.Ctx, b.Env.Client, s.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		launch := fleetCost(win.TL, pods, cat, bounded)
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
			figures["slowestJoinSeconds"] = slowestJoin(tl, win.ops, last).Seconds()
			figures["launchPasses"] = float64(launchPasses(tl, first, last))
		}
	})
	figures["timeToRunningSeconds"] = figures["firstPodToAllRunningSeconds"]
	var changed time.Time
	if ok && len(w.Then) > 0 {
		changed = time.Now()
		for i, d := range deployments {
			to := w.Then[i]
			harness.Update(s, d.DeepCopy(), func(cur *appsv1.Deployment) {
				cur.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(to.CPU), corev1.ResourceMemory: resource.MustParse(to.Mem),
				}
			})
		}
		ok = rolledOut(s.Ctx, b.Env.Client, deployments, tm.Timeout) && win.TL.WaitFor(s.Ctx, tm.Timeout, running(total))
		if ok {
			figures["changeToAllRunningSeconds"] = round3(time.Since(changed).Seconds())
			figures["timeToRunningSeconds"] += figures["changeToAllRunningSeconds"]
		}
	}
	settled := ok && run.settle(tm)
	shape := ""
	if len(w.Then) > 0 {
		shape = ", rolled out to the next shapes once every pod runs"
	}
	r := win.Close(fmt.Sprintf("cost-%s-steering-%s", w.Name, state),
		fmt.Sprintf("%d pods, %s (%s), one Deployment per shape%s, quota lifted and known, node daemons %s/%s on every node, consolidation after %s, cost steering %s; settled = every pod Running, every node joined, and no NodeClaim/NodeGroup change, join or pod start for %s",
			total, w.Name, w.Note, shape, NodeDaemons.CPU, NodeDaemons.Mem, tm.ConsolidateAfter, state, tm.Quiet))
	r.Env = map[string]string{"COST_STEERING": strconv.FormatBool(on)}
	maps.Copy(r.Figures, figures)
	win.TL.Read(func(tl *Timeline) {
		launched, deleted, churned := 0, 0, 0
		for _, g := range tl.Groups {
			if !g.Managed || g.Created.IsZero() {
				continue
			}
			launched++
			if !g.Deleting.IsZero() {
				deleted++
				// A node launched for the workload's new shape and deleted again is churn.
				if !changed.IsZero() && g.Created.After(changed) {
					churned++
				}
			}
		}
		r.Figures["nodeGroupsLaunched"] = float64(launched)
		r.Figures["nodeGroupsDeleted"] = float64(deleted)
		if !changed.IsZero() {
			r.Figures["nodeGroupsLaunchedAfterChangeDeleted"] = float64(churned)
		}
	})
	switch {
	case !ok:
		win.TL.Read(func(tl *Timeline) {
			_, up := countRunning(tl)
			r.Misses = append(r.Misses, fmt.Sprintf("only %d of %d pods Running (of the last wave) within %s", up, total, tm.Timeout))
		})
	case !settled:
		r.Misses = append(r.Misses, fmt.Sprintf("the fleet did not settle within %s", tm.Settle))
	}
	run.finish(t, b, r)
	return r
}

// costRun is one cost workload's pods on a NodePool of their own, watched by a window.
type costRun struct {
	s            *harness.Scenario
	win          *Window
	cat, bounded []FlavorCost
	deployments  []*appsv1.Deployment
	total        int
}

// launchWorkload restarts the controller with env (the quota known), then creates a NodePool
// open to every flavor, on-demand, that consolidates after tm.ConsolidateAfter, opens a window
// on it, and creates the workload's Deployments: n pods (the workload's own count if it has
// one) shared among its shapes.
func (b *Bench) launchWorkload(t *testing.T, w Workload, n int, tm SteeringTiming, env map[string]string) *costRun {
	b.RestartOutside(t, With(QuotaKnown, env))
	// On-demand, as the shipped examples pin it: core's replace consolidation asks a pool that
	// leaves the capacity type open for spot, which CKE does not sell (docs/e2e.md).
	s := b.scenario(t)
	pool := s.NodePool("", s.NodeClass("", nil), nil, tm.ConsolidateAfter, harness.OnDemand)
	b.LiftQuota()
	cat, err := b.Catalogue()
	if err != nil {
		t.Fatal(err)
	}
	run := &costRun{s: s, cat: cat, bounded: withOverhead(cat, NodeDaemons)}
	run.win = b.Open(s)
	if w.Pods > 0 {
		n = w.Pods
	}
	for i, sh := range w.Shapes {
		replicas := n / len(w.Shapes)
		if i < n%len(w.Shapes) {
			replicas++
		}
		run.total += replicas
		run.deployments = append(run.deployments, s.Deployment(sh.Name, pool.Name, int32(replicas), sh.CPU, sh.Mem))
	}
	return run
}

// finish prices the fleet the pods run on into r, against the bound that counts the node
// daemons, and adds r to the report.
func (r *costRun) finish(t *testing.T, b *Bench, res *Result) {
	if pods, err := livePods(r.s.Ctx, b.Env.Client, r.s.Namespace); err == nil {
		res.Cost = fleetCost(r.win.TL, pods, r.cat, r.bounded)
		if res.Cost.Bound.CostHourly > 0 {
			res.Figures["onePassRatio"] = round3(onePassFleet(r.cat, pods, NodeDaemons).Hourly / res.Cost.Bound.CostHourly)
		}
		res.Notes = append(res.Notes, "bound: each node's allocatable less the node daemons' requests")
	} else {
		res.Notes = append(res.Notes, "cost: "+err.Error())
	}
	finish(r.s, res)
	b.Add(t, res)
}

// settle waits, at most tm.Settle, for the fleet to settle: every pod Running, no NodeGroup
// deleting, every node joined, and quiet for tm.Quiet since the fleet last changed, since the
// last node joined and since the last pod started. A node still joining holds consolidation
// back (core moves no pod onto a node not yet initialized) and changes no NodeClaim or
// NodeGroup when it joins; its join and its pods' start are what make the nodes around it
// candidates for consolidation consolidateAfter later.
func (r *costRun) settle(tm SteeringTiming) bool {
	return r.settleSince(time.Time{}, tm)
}

// settleSince is settle with the quiet window counted from since at the earliest: what
// changes the fleet after since (a controller restarted then) has that long to begin.
func (r *costRun) settleSince(since time.Time, tm SteeringTiming) bool {
	return r.win.TL.WaitFor(r.s.Ctx, tm.Settle, func(tl *Timeline) bool {
		return running(r.total)(tl) && time.Since(tl.lastFleetChange) >= tm.Quiet && time.Since(lastRunning(tl)) >= tm.Quiet &&
			time.Since(since) >= tm.Quiet && tl.noneDeleting() && tl.noneJoining() && time.Since(tl.lastJoined()) >= tm.Quiet
	})
}

// slowestJoin is the longest join the simulator drew for the managed NodeGroups created by
// until: on a profile that spreads joins, a fleet of more nodes draws the platform's slow joins
// more often, and a slow join sets the time to every pod Running unless the other nodes have
// room for its pods. It is what a comparison of two runs' times has to be read beside.
func slowestJoin(tl *Timeline, ops operator.Options, until time.Time) time.Duration {
	var slowest time.Duration
	for name, g := range tl.Groups {
		if g.Managed && !g.Created.IsZero() && !g.Created.After(until) {
			slowest = max(slowest, ops.JoinDelayOf(name))
		}
	}
	return slowest
}

// passGap separates two of core's scheduling passes in the NodeClaims they create: a pass
// creates its NodeClaims together, and the next one waits at least core's batch idle
// duration (1 s by default) for pods before it plans.
const passGap = 750 * time.Millisecond

// launchPasses is how many scheduling passes created NodeClaims from from to until: the
// NodeClaims' creations grouped by passGap. Each pass after the first is a wait on top of a
// join, so two runs' times read beside it.
func launchPasses(tl *Timeline, from, until time.Time) int {
	var created []time.Time
	for _, c := range tl.Claims {
		if !c.Created.IsZero() && !c.Created.Before(from) && !c.Created.After(until) {
			created = append(created, c.Created)
		}
	}
	slices.SortFunc(created, time.Time.Compare)
	passes := 0
	for i, at := range created {
		if i == 0 || at.Sub(created[i-1]) >= passGap {
			passes++
		}
	}
	return passes
}

// lastRunning is when the last of the live pods started running.
func lastRunning(tl *Timeline) time.Time {
	var last time.Time
	for _, p := range tl.Pods {
		if !p.Deleted && p.Running.After(last) {
			last = p.Running
		}
	}
	return last
}

// rolledOut waits until each Deployment has rolled out its current template: every replica
// updated and available, no old one left.
func rolledOut(ctx context.Context, c client.Client, ds []*appsv1.Deployment, timeout time.Duration) bool {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, d := range ds {
			cur := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
				return false, nil
			}
			want := ptr.Deref(cur.Spec.Replicas, 1)
			st := cur.Status
			if st.ObservedGeneration < cur.Generation || st.UpdatedReplicas != want || st.AvailableReplicas != want || st.Replicas != want {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}

// SteeringPair runs a workload with cost steering on, as shipped, then off, and holds the
// pair to cost steering's targets: on settles within steering.boundRatio × the bound (1.10),
// costs no more than off, and has every pod Running within steering.timeRatio × off's time
// (1.05); a workload that changes shape deletes none of the nodes launched for its new shape.
func (b *Bench) SteeringPair(t *testing.T, w Workload, n int, tm SteeringTiming) {
	var on, off *Result
	t.Run("on", func(t *testing.T) { on = b.CostSteering(t, w, n, true, tm) })
	t.Run("off", func(t *testing.T) { off = b.CostSteering(t, w, n, false, tm) })
	maxRatio := b.Threshold("steering.boundRatio", 1.10)
	maxTime := b.Threshold("steering.timeRatio", 1.05)
	measured := on != nil && off != nil && on.Cost != nil && off.Cost != nil
	if measured {
		for _, r := range []*Result{on, off} {
			t.Logf("%s: settled fleet %.4f €/h %v, bound %.4f %v, ratio %.3f (at launch %.3f, one pass %.3f), %v NodeGroups launched, %v deleted, all Running in %vs (slowest join drawn %vs, %v launch passes)",
				r.Name, r.Cost.FleetHourly, r.Cost.Fleet, r.Cost.Bound.CostHourly, r.Cost.Bound.Fleet, r.Cost.Ratio, r.Figures["launchRatio"], r.Figures["onePassRatio"],
				r.Figures["nodeGroupsLaunched"], r.Figures["nodeGroupsDeleted"], r.Figures["timeToRunningSeconds"], r.Figures["slowestJoinSeconds"], r.Figures["launchPasses"])
		}
	}
	// The targets in the report's order; value and met are read only when both runs were priced.
	type target struct {
		what, target string
		value        func() string
		met          func() bool
	}
	fleet := func(r *Result) string {
		return fmt.Sprintf("%.4f €/h %v (%.3f × bound, %v NodeGroups launched, %v deleted)", r.Cost.FleetHourly, r.Cost.Fleet, r.Cost.Ratio, r.Figures["nodeGroupsLaunched"], r.Figures["nodeGroupsDeleted"])
	}
	took := func(r *Result) float64 { return r.Figures["timeToRunningSeconds"] }
	targets := []target{
		{"settled fleet / bound, steering on", fmt.Sprintf("≤ %g", maxRatio),
			func() string {
				return fmt.Sprintf("%.3f (bound %.4f €/h %v; one pass of every pod on the best offer: %.3f)",
					on.Cost.Ratio, on.Cost.Bound.CostHourly, on.Cost.Bound.Fleet, on.Figures["onePassRatio"])
			},
			func() bool { return on.Cost.Ratio <= maxRatio }},
		{"settled fleet, steering on vs off", "on ≤ off",
			func() string { return "on " + fleet(on) + "; off " + fleet(off) },
			func() bool { return on.Cost.FleetHourly <= off.Cost.FleetHourly+1e-9 }},
		{"time to every pod Running, on vs off", fmt.Sprintf("on ≤ %g × off", maxTime),
			func() string {
				return fmt.Sprintf("on %.1f s, off %.1f s (%.2f ×)", took(on), took(off), took(on)/max(took(off), 1e-9))
			},
			func() bool { return took(on) > 0 && took(on) <= maxTime*took(off) }},
	}
	if len(w.Then) > 0 {
		churn := func(r *Result) float64 { return r.Figures["nodeGroupsLaunchedAfterChangeDeleted"] }
		targets = append(targets, target{"nodes for the new shape deleted, steering on", "0",
			func() string { return fmt.Sprintf("%.0f (off: %.0f)", churn(on), churn(off)) },
			func() bool { return churn(on) == 0 }})
	}
	// A pair with a missed run (pods not Running, or a fleet that never settled) meets no
	// target: its figures are not the ones the targets are about.
	clean := measured && len(on.Misses) == 0 && len(off.Misses) == 0
	for _, tg := range targets {
		m := fmt.Sprintf("cost steering, %s: %s", w.Name, tg.what)
		if !measured {
			b.Unmeasured(m, tg.target, "cost-"+w.Name, "a run has no cost figures")
			continue
		}
		b.Check(m, tg.target, on.Name, tg.value(), clean && tg.met())
	}
}
