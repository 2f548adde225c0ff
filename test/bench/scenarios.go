package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Shape is one kind of pod a scenario asks for.
type Shape struct {
	Name     string
	Replicas int32
	CPU, Mem string
}

// MixedBurst is the 50-pod mixed burst: five sizes, ten pods each.
var MixedBurst = []Shape{
	{"tiny", 10, "250m", "256Mi"}, {"small", 10, "500m", "512Mi"}, {"medium", 10, "1", "1Gi"},
	{"large", 10, "2", "2Gi"}, {"memory", 10, "500m", "3Gi"},
}

// ScaleShapes are cycled over the pods of the scale runs (KWOK-test-like small pods).
var ScaleShapes = []Shape{
	{"a", 0, "100m", "128Mi"}, {"b", 0, "250m", "256Mi"}, {"c", 0, "500m", "512Mi"},
	{"d", 0, "100m", "512Mi"}, {"e", 0, "250m", "128Mi"},
}

// running is the condition "n live pods, all Running and Ready".
func running(n int) func(tl *Timeline) bool {
	return func(tl *Timeline) bool {
		live, up := 0, 0
		for _, p := range tl.Pods {
			if p.Deleted {
				continue
			}
			live++
			if !p.Running.IsZero() {
				up++
			}
		}
		return live == n && up == n
	}
}

func countRunning(tl *Timeline) (live, up int) {
	for _, p := range tl.Pods {
		if p.Deleted {
			continue
		}
		live++
		if !p.Running.IsZero() {
			up++
		}
	}
	return live, up
}

// livePods lists the scenario's Running pods that are not being deleted: the demand the
// fleet serves.
func livePods(ctx context.Context, c client.Client, ns string) ([]corev1.Pod, error) {
	l := &corev1.PodList{}
	if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out, nil
}

func (b *Bench) setup(t *testing.T, consolidateAfter time.Duration) (*harness.Scenario, *karpv1.NodePool) {
	s := b.scenario(t)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, consolidateAfter)
	return s, pool
}

// restart restarts the controller with overrides and waits until it holds the leader lease
// (controller-runtime's leader_election_master_status): until then it does nothing, and a
// window opened earlier would measure the lease hand-over. Returns the wait for the lease.
func (b *Bench) restart(t *testing.T, s *harness.Scenario, overrides map[string]string) time.Duration {
	t.Helper()
	s.RestartController(overrides)
	return b.mustLead(t)
}

// RestartOutside restarts the controller between scenarios (the next Scenario checks the new
// process's log) and waits for it to lead.
func (b *Bench) RestartOutside(t *testing.T, overrides map[string]string) time.Duration {
	t.Helper()
	if err := b.Env.RestartController(context.Background(), overrides); err != nil {
		t.Fatal(err)
	}
	return b.mustLead(t)
}

// QuotaKnown tells the controller the lifted quota (CLEVER_CLOUD_QUOTA_*), so that scenarios
// that are not about the quota do not measure its provisional-limit probing.
var QuotaKnown = map[string]string{
	"CLEVER_CLOUD_QUOTA_CPU":       strconv.Itoa(Lifted),
	"CLEVER_CLOUD_QUOTA_MEMORY_GB": strconv.Itoa(Lifted),
}

// With merges maps, later ones winning.
func With(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// mustLead waits until the controller holds the leader lease and returns how long that took.
func (b *Bench) mustLead(t *testing.T) time.Duration {
	t.Helper()
	began := time.Now()
	err := stack.Poll(context.Background(), 2*time.Minute, func() error {
		v, err := b.Env.Controller().Metric("leader_election_master_status", nil)
		if err != nil {
			return err
		}
		if v < 1 {
			return fmt.Errorf("the restarted controller does not hold the leader lease yet")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return time.Since(began)
}

func (b *Bench) cost(t *testing.T, w *Window, r *Result) {
	pods, err := livePods(context.Background(), b.Env.Client, w.s.Namespace)
	if err != nil {
		r.Notes = append(r.Notes, "cost: "+err.Error())
		return
	}
	cat, err := b.Catalogue()
	if err != nil {
		r.Notes = append(r.Notes, "cost: "+err.Error())
		return
	}
	r.Cost = fleetCost(w.TL, pods, cat, cat)
	if r.Series != nil && !w.end.IsZero() {
		w.TL.Read(func(tl *Timeline) { r.Series.FleetHourly = fleetSeries(tl, w.Start, w.end, prices(cat)) })
	}
}

// finish records the unexpected error lines and lets the scenario's cleanup pass: the bench
// reports controller errors, it does not fail on them.
func finish(s *harness.Scenario, r *Result) {
	// Distinct error messages (with their error field), counted.
	counts := map[string]int{}
	for _, raw := range s.ErrorLines() {
		msg := raw
		var m map[string]any
		if json.Unmarshal([]byte(raw), &m) == nil {
			msg = fmt.Sprintf("%v: %v", m["message"], m["error"])
		}
		counts[truncate(msg, 400)]++
	}
	if len(counts) > 0 {
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra["controllerErrors"] = counts
	}
	s.AllowErrors(".")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// SyncedInterval is how often the cluster-state gauge is sampled during a traced burst.
const SyncedInterval = 100 * time.Millisecond

// openTraced opens a window that also traces Karpenter core's cluster-state gauge, once the
// gauge reads 1 (up to 20 s: the disruption controller refreshes it every 10 s).
func (b *Bench) openTraced(s *harness.Scenario) (*Window, string) {
	note := ""
	if err := b.waitSynced(20 * time.Second); err != nil {
		note = "the cluster state did not read synced before the window opened: " + err.Error()
	}
	w := b.Open(s)
	w.TraceSynced(SyncedInterval)
	return w, note
}

// Single: one 1 CPU / 1 Gi pod on an empty pool.
func (b *Bench) Single(t *testing.T, timeout time.Duration) *Result {
	s, pool := b.setup(t, 10*time.Minute)
	b.LiftQuota()
	w, note := b.openTraced(s)
	s.Deployment("one", pool.Name, 1, "1", "1Gi")
	ok := w.TL.WaitFor(s.Ctx, timeout, running(1))
	r := w.Close("single", "one pod of 1 CPU / 1 Gi on an empty NodePool, quota lifted")
	if note != "" {
		r.Notes = append(r.Notes, note)
	}
	if !ok {
		r.Misses = append(r.Misses, fmt.Sprintf("the pod was not Running within %s", timeout))
	}
	b.cost(t, w, r)
	finish(s, r)
	b.Add(t, r)
	return r
}

// BurstAndConsolidation: a mixed burst of 50 pods, then a scale-down to 10 and the
// consolidation that follows. Two results.
// With onDemand, the NodePool requires karpenter.sh/capacity-type=on-demand; otherwise it
// leaves capacity-type open like the e2e suite's pools (and most users').
func (b *Bench) BurstAndConsolidation(t *testing.T, quiet, settle time.Duration, onDemand bool) (*Result, *Result) {
	s := b.scenario(t)
	class := s.NodeClass("", nil)
	var opts []harness.PoolOption
	suffix := ""
	if onDemand {
		suffix = "-on-demand"
		opts = append(opts, harness.OnDemand)
	}
	pool := s.NodePool("", class, nil, 20*time.Second, opts...)
	b.LiftQuota()
	w := b.Open(s)
	var ds []*appsv1.Deployment
	total := 0
	for _, sh := range MixedBurst {
		ds = append(ds, s.Deployment(sh.Name, pool.Name, sh.Replicas, sh.CPU, sh.Mem))
		total += int(sh.Replicas)
	}
	ok := w.TL.WaitFor(s.Ctx, 4*time.Minute, running(total))
	burst := w.Close("burst-50"+suffix, "mixed burst of 50 pods (10 each of 250m/256Mi, 500m/512Mi, 1/1Gi, 2/2Gi, 500m/3Gi), quota lifted, consolidateAfter 20s"+poolNote(onDemand))
	if !ok {
		burst.Misses = append(burst.Misses, "not every pod Running within 4m")
	}
	b.cost(t, w, burst)
	b.Add(t, burst)

	// Scale down to 2 of each shape and wait for the fleet to settle: every pod Running, no
	// NodeClaim or NodeGroup created or deleted for `quiet`.
	w2 := b.Open(s)
	down := 0
	for _, d := range ds {
		s.Scale(d, 2)
		down += 2
	}
	scaled := time.Now()
	settled := w2.TL.WaitFor(s.Ctx, settle, func(tl *Timeline) bool {
		last := tl.lastFleetChange
		if last.Before(scaled) {
			last = scaled
		}
		return running(down)(tl) && time.Since(last) >= quiet && tl.noneDeleting()
	})
	var lastChange time.Time
	w2.TL.Read(func(tl *Timeline) { lastChange = tl.lastFleetChange })
	cons := w2.Close("consolidation"+suffix, fmt.Sprintf("the burst scaled down to 10 pods (2 of each shape); settled = every pod Running and no NodeClaim/NodeGroup change for %s%s", quiet, poolNote(onDemand)))
	cons.PodsRunning = down
	if !settled {
		cons.Misses = append(cons.Misses, fmt.Sprintf("the fleet did not settle within %s", settle))
	}
	if lastChange.After(scaled) {
		cons.Figures["scaleDownToLastFleetChangeSeconds"] = round3(lastChange.Sub(scaled).Seconds())
	} else {
		cons.Figures["scaleDownToLastFleetChangeSeconds"] = 0
		cons.Notes = append(cons.Notes, "no fleet change after the scale-down")
	}
	if burst.Cost != nil {
		cons.Figures["fleetHourlyBefore"] = burst.Cost.FleetHourly
	}
	b.cost(t, w2, cons)
	w2.TL.Read(func(tl *Timeline) {
		deleted := 0
		for _, c := range tl.Claims {
			if !c.Deleting.IsZero() && !c.Deleting.Before(scaled) {
				deleted++
			}
		}
		cons.Figures["nodeClaimsDeleted"] = float64(deleted)
		// Replacements that never launched: created after the scale-down, deleted without a
		// NodeGroup (the provider's Create refused them).
		failed := 0
		for name, c := range tl.Claims {
			if c.Created.After(scaled) && !c.Deleting.IsZero() && c.Launched.IsZero() && tl.Groups[name] == nil {
				failed++
			}
		}
		cons.Figures["replacementNodeClaimsNeverLaunched"] = float64(failed)
	})
	if lines := launchFailures(b.Env.Controller(), scaled); len(lines) > 0 {
		cons.Extra = map[string]any{"launchFailures": len(lines), "launchFailureSample": lines[0]}
	}
	finish(s, cons)
	b.Add(t, cons)
	return burst, cons
}

func poolNote(onDemand bool) string {
	if onDemand {
		return "; NodePool requires karpenter.sh/capacity-type=on-demand"
	}
	return "; NodePool leaves karpenter.sh/capacity-type open"
}

// launchFailures are the controller's "failed launching nodeclaim" lines since t, with the
// disruption commands' capacity types, shortened.
func launchFailures(c *stack.Controller, since time.Time) []string {
	var out []string
	for _, l := range c.Lines() {
		ts, _ := l.Fields["time"].(string)
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(since) {
			continue
		}
		if l.Message == "failed launching nodeclaim" || l.Message == "failed terminating nodes while executing a disruption command" {
			out = append(out, truncate(l.Message+": "+fmt.Sprint(l.Fields["error"]), 300))
		}
	}
	return out
}

// CreatePods creates n bare pods in the scenario's namespace, cycling over shapes, from
// parallel workers on a client without client-side rate limit (so that the apiserver, not the
// bench or the controller-manager's 20 QPS, sets the pace).
func (b *Bench) CreatePods(s *harness.Scenario, pool string, n int, shapes []Shape) error {
	cfg := *b.Env.Cluster.Config()
	cfg.QPS, cfg.Burst = 2000, 4000
	c, err := client.New(&cfg, client.Options{Scheme: stack.Scheme()})
	if err != nil {
		return err
	}
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				sh := shapes[i%len(shapes)]
				errs <- c.Create(s.Ctx, barePod(s.Namespace, fmt.Sprintf("p-%s-%04d", sh.Name, i), pool, sh))
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func barePod(ns, name, pool string, sh Shape) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "scale", "shape": sh.Name}},
		Spec:       harness.PausePodSpec(pool, sh.CPU, sh.Mem),
	}
}

// Scale: n small pods at once with the quota lifted; with restart, the controller is
// restarted first with overrides (nil: the bundle's environment) so each run starts from the
// same state.
func (b *Bench) Scale(t *testing.T, name string, n int, timeout time.Duration, restart bool, overrides map[string]string) *Result {
	s, pool := b.setup(t, 10*time.Minute)
	b.LiftQuota()
	var lease time.Duration
	if restart {
		lease = b.restart(t, s, overrides)
	}
	w := b.Open(s)
	if err := b.CreatePods(s, pool.Name, n, ScaleShapes); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	ok := w.TL.WaitFor(s.Ctx, timeout, running(n))
	desc := fmt.Sprintf("%d bare pods (cycling 100m/128Mi, 250m/256Mi, 500m/512Mi, 100m/512Mi, 250m/128Mi) created at once by 16 workers, quota lifted", n)
	if len(overrides) > 0 {
		desc += fmt.Sprintf("; controller env %v", overrides)
	}
	r := w.Close(name, desc)
	r.Env = overrides
	if restart {
		r.Figures["leaseWaitAfterRestartSeconds"] = round3(lease.Seconds())
	} else {
		r.Notes = append(r.Notes, "the controller process of the previous scenario, not restarted")
	}
	r.Figures["podCreationSeconds"] = round3(created.Sub(w.Start).Seconds())
	w.TL.Read(func(tl *Timeline) {
		var first, lastClaim, lastBound, lastRunning time.Time
		for _, p := range tl.Pods {
			if first.IsZero() || p.Created.Before(first) {
				first = p.Created
			}
			if p.Bound.After(lastBound) {
				lastBound = p.Bound
			}
			if p.Running.After(lastRunning) {
				lastRunning = p.Running
			}
		}
		for _, c := range tl.Claims {
			if c.Created.After(lastClaim) {
				lastClaim = c.Created
			}
		}
		if !first.IsZero() {
			r.Figures["firstPodToLastNodeClaimSeconds"] = round3(lastClaim.Sub(first).Seconds())
			r.Figures["firstPodToAllBoundSeconds"] = round3(lastBound.Sub(first).Seconds())
			r.Figures["firstPodToAllRunningSeconds"] = round3(lastRunning.Sub(first).Seconds())
		}
	})
	if !ok {
		w.TL.Read(func(tl *Timeline) {
			_, up := countRunning(tl)
			r.Misses = append(r.Misses, fmt.Sprintf("only %d of %d pods Running within %s", up, n, timeout))
		})
	}
	b.cost(t, w, r)
	finish(s, r)
	b.Add(t, r)
	return r
}

// Burst10: ten 1 CPU / 1 Gi pods, one per node, at once (ten NodeClaims in one batch), quota
// lifted: time from the first NodeClaim to the last NodeGroup decided (target: ≤ the
// operator's slowest decision + 1 s), and how long Karpenter core's cluster state stays unsynced while
// the ten launch (target: ≤ 3 s), the gauge sampled every SyncedInterval.
func (b *Bench) Burst10(t *testing.T) *Result {
	s, pool := b.setup(t, 10*time.Minute)
	b.LiftQuota()
	w, note := b.openTraced(s)
	s.Deployment("spread", pool.Name, 10, "1", "1Gi", harness.OnePerNode)
	ok := w.TL.WaitFor(s.Ctx, 3*time.Minute, running(10))
	r := w.Close("burst-10-nodeclaims", fmt.Sprintf("10 pods of 1 CPU / 1 Gi with required anti-affinity on hostname (10 NodeClaims in one batch), decision delay %s, quota lifted; %s sampled every %s", w.ops.DecisionDelay, syncedMetric, SyncedInterval))
	if note != "" {
		r.Notes = append(r.Notes, note)
	}
	if !ok {
		r.Misses = append(r.Misses, "not every pod Running within 3m")
	}
	w.TL.Read(func(tl *Timeline) {
		var firstClaim, lastClaim, firstGroup, lastGroup, lastDecision time.Time
		var createToDecision []float64
		for name, c := range tl.Claims {
			if c.Created.Before(w.Start) {
				continue
			}
			if firstClaim.IsZero() || c.Created.Before(firstClaim) {
				firstClaim = c.Created
			}
			if c.Created.After(lastClaim) {
				lastClaim = c.Created
			}
			g := tl.Groups[name]
			if g == nil {
				continue
			}
			if firstGroup.IsZero() || g.Created.Before(firstGroup) {
				firstGroup = g.Created
			}
			if g.Created.After(lastGroup) {
				lastGroup = g.Created
			}
			if g.Decided.After(lastDecision) {
				lastDecision = g.Decided
			}
			if !g.Decided.IsZero() {
				createToDecision = append(createToDecision, secs(g.Created, g.Decided))
			}
		}
		if !firstClaim.IsZero() && !lastDecision.IsZero() {
			r.Figures["firstClaimToLastDecisionSeconds"] = round3(lastDecision.Sub(firstClaim).Seconds())
			r.Figures["claimCreationSpreadSeconds"] = round3(lastClaim.Sub(firstClaim).Seconds())
			r.Figures["groupCreationSpreadSeconds"] = round3(lastGroup.Sub(firstGroup).Seconds())
			r.Figures["firstClaimToLastGroupCreatedSeconds"] = round3(lastGroup.Sub(firstClaim).Seconds())
		}
		sort.Float64s(createToDecision)
		r.Raw = map[string][]float64{"groupCreatedToDecisionSeconds": roundAll(createToDecision)}
	})
	// Target: the provider adds at most 1 s to the operator's slowest decision.
	target := r.GroupToDecision.Max + 1
	if v, ok := r.Figures["firstClaimToLastDecisionSeconds"]; !ok || v > target {
		r.Misses = append(r.Misses, fmt.Sprintf("first NodeClaim → last NodeGroup decided %.3fs, target ≤ the slowest decision + 1 s = %.3fs", v, target))
	}
	b.cost(t, w, r)
	finish(s, r)
	b.Add(t, r)
	return r
}

func roundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = round3(x)
	}
	return out
}

// QuotaEpisode: 12 pods of 1 CPU / 1 Gi against CKE's default 40 vCPU / 40 GB with the two S
// control-plane nodes (16 vCPU / 24 GB), watched for window. configured gives the controller
// the quota (CLEVER_CLOUD_QUOTA_CPU/MEMORY_GB=40); otherwise it must learn it.
func (b *Bench) QuotaEpisode(t *testing.T, configured bool, window time.Duration) *Result {
	s, pool := b.setup(t, 10*time.Minute)
	// Karpenter core logs every InsufficientCapacity launch failure at error level.
	s.AllowErrors(`Quota exceeded`)
	env := map[string]string(nil)
	name := "quota-episode-learned"
	if configured {
		env = map[string]string{"CLEVER_CLOUD_QUOTA_CPU": "40", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "40"}
		name = "quota-episode-configured"
	}
	// A fresh controller: nothing learned from an earlier scenario.
	lease := b.restart(t, s, env)
	startMetric := func() float64 {
		v, _ := b.Env.Controller().Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"outcome": "QuotaExceeded"})
		return v
	}
	before := startMetric()
	w := b.Open(s)
	s.Deployment("quota", pool.Name, 12, "1", "1Gi")
	// Watch the whole window: the point is what happens while demand stays above quota.
	deadline := time.Now().Add(window)
	w.TL.WaitFor(s.Ctx, window, func(tl *Timeline) bool { return time.Now().After(deadline) })
	r := w.Close(name, fmt.Sprintf("12 pods of 1 CPU / 1 Gi, organisation quota 40 vCPU / 40 GB, two S control-plane nodes (16 vCPU / 24 GB), quota %s, watched for %s", map[bool]string{true: "configured in the controller (40/40)", false: "not configured (learned from the first rejection)"}[configured], window))
	r.Env = env
	r.Figures["leaseWaitAfterRestartSeconds"] = round3(lease.Seconds())
	r.Figures["rejectedByMetric"] = startMetric() - before
	w.TL.Read(func(tl *Timeline) {
		live, up := countRunning(tl)
		r.Figures["podsRunning"] = float64(up)
		r.Figures["podsPending"] = float64(live - up)
		var last time.Time
		for _, p := range tl.Pods {
			if p.Running.After(last) {
				last = p.Running
			}
		}
		if tl.lastFleetChange.After(last) {
			last = tl.lastFleetChange
		}
		if !last.IsZero() {
			r.Figures["timeToSteadyStateSeconds"] = round3(last.Sub(w.Start).Seconds())
		}
		fl := map[string]int{}
		for _, g := range tl.Groups {
			if g.Managed && !g.Decided.IsZero() && g.Deleting.IsZero() {
				fl[g.Flavor]++
			}
		}
		r.Extra = map[string]any{"launchedFleet": fl}
	})
	target := 1
	if configured {
		target = 0
	}
	if r.Rejected > target {
		r.Misses = append(r.Misses, fmt.Sprintf("%d NodeGroups rejected by the quota engine, target ≤ %d", r.Rejected, target))
	}
	// Why the rest pend: the events on the scenario's pods and NodePool.
	if evs, err := b.Env.Events(s.Ctx, ""); err == nil {
		seen := map[string]bool{}
		var msgs []string
		for _, ev := range evs {
			if ev.InvolvedObject.Namespace != s.Namespace && ev.InvolvedObject.Name != pool.Name {
				continue
			}
			if ev.Reason == "Scheduled" || ev.Reason == "Pulled" || ev.Reason == "Created" || ev.Reason == "Started" || ev.Reason == "SuccessfulCreate" || ev.Reason == "ScalingReplicaSet" {
				continue
			}
			m := ev.InvolvedObject.Kind + " " + ev.Reason + ": " + truncate(ev.Message, 240)
			if !seen[m] && len(msgs) < 8 {
				seen[m] = true
				msgs = append(msgs, m)
			}
		}
		r.Extra["events"] = msgs
	}
	b.cost(t, w, r)
	finish(s, r)
	b.Add(t, r)
	return r
}
