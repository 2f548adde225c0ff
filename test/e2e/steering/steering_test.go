package steering

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/steering"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// The two shapes the scenarios use. CPU-heavy pods (0.5 GB per vCPU) fill a 2XS by CPU, four
// to a node, with nothing idle; core alone packs them onto an XL, whose memory is paid for and
// idle. Memory-heavy pods (3 GB per vCPU) fill nodes by memory: L and XL are their shape.
const (
	cpuHeavyCPU, cpuHeavyMemory = "1", "512Mi"
	memHeavyCPU, memHeavyMemory = "250m", "768Mi"
	// cpuHeavyPods is the CPU-heavy burst: six full 2XS when steered (0.1998 EUR/h), an XL and
	// an S when core packs it with every flavor (0.3111 EUR/h), by the steering package's model.
	cpuHeavyPods = 24
)

const (
	decisionsMetric = "karpenter_clevercloud_steering_decisions_total"
	priceMetric     = "karpenter_clevercloud_catalog_flavor_price_hourly"
)

// Every scenario raises the organisation quota (harness.RaiseQuota, 200 vCPU / 200 GB, known to
// the controller): CKE's default 40 vCPU / 40 GB cannot hold the bursts, and with room to
// spare the quota steers nothing, so what the scenarios see is the bill's steering alone.

// burstTimeout is the budget for a burst's nodes, launched in parallel, all Running.
const burstTimeout = 2 * harness.LaunchTimeout

// decisions reads how many steering decisions for pool gave reason.
func decisions(s *harness.Scenario, pool, reason string) float64 {
	s.T.Helper()
	return s.Metric(decisionsMetric, map[string]string{"nodepool": pool, "reason": reason})
}

// hourly is what a fleet of flavors costs per hour, at the prices the controller uses.
func hourly(s *harness.Scenario, flavors []string) float64 {
	s.T.Helper()
	sum := 0.0
	for _, f := range flavors {
		p := s.Metric(priceMetric, map[string]string{"flavor": f})
		Expect(p).To(BeNumerically(">", 0), "the price of %s", f)
		sum += p
	}
	return sum
}

// podFlavors lists the flavors of the nodes pods run on, one per pod.
func podFlavors(s *harness.Scenario, pods []corev1.Pod) []string {
	s.T.Helper()
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, harness.FlavorOfNode(s.NodeOf(p)))
	}
	return out
}

// since returns the records created after the first n.
func since(records []harness.GroupRecord, n int) []harness.GroupRecord {
	return slices.DeleteFunc(slices.Clone(records), func(r harness.GroupRecord) bool { return r.Index <= n })
}

// roomFor counts how many more pods of cpu and memory the pool's nodes can hold, from their
// allocatable and the requests of the pods bound to them.
func roomFor(s *harness.Scenario, pool, cpu, memory string) int {
	s.T.Helper()
	wantCPU, wantMemory := resource.MustParse(cpu), resource.MustParse(memory)
	nodes := &corev1.NodeList{}
	Expect(env.Client.List(s.Ctx, nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: pool})).To(Succeed())
	pods := &corev1.PodList{}
	Expect(env.Client.List(s.Ctx, pods)).To(Succeed())
	room := 0
	for _, n := range nodes.Items {
		freeCPU, freeMemory := n.Status.Allocatable.Cpu().MilliValue(), n.Status.Allocatable.Memory().Value()
		for _, p := range pods.Items {
			if p.Spec.NodeName != n.Name || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			for _, c := range p.Spec.Containers {
				freeCPU -= c.Resources.Requests.Cpu().MilliValue()
				freeMemory -= c.Resources.Requests.Memory().Value()
			}
		}
		room += int(max(0, min(freeCPU/wantCPU.MilliValue(), freeMemory/wantMemory.Value())))
	}
	return room
}

// onFlavor holds the Deployment's pods to one flavor by node selector.
func onFlavor(flavor string) harness.WorkloadOption {
	return func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelInstanceTypeStable: flavor}
	}
}

// tearDown deletes the Deployments and the pool's NodeClaims and waits for their NodeGroups to
// go, so that the pool starts again from no node.
func tearDown(s *harness.Scenario, pool string, ds ...*appsv1.Deployment) {
	s.T.Helper()
	for _, d := range ds {
		Expect(env.Client.Delete(s.Ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Expect(env.Client.DeleteAllOf(s.Ctx, &corev1.Pod{}, client.InNamespace(d.Namespace),
			client.MatchingLabels(d.Spec.Selector.MatchLabels), client.GracePeriodSeconds(0))).To(Succeed())
	}
	Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(s.Ctx, pods, client.InNamespace(s.Namespace))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty(), "pods of the scenario")
	}).WithTimeout(time.Minute).Should(Succeed())
	Eventually(func(g Gomega) {
		claims := s.PoolClaims(pool)
		for i := range claims {
			if claims[i].DeletionTimestamp == nil {
				g.Expect(client.IgnoreNotFound(env.Client.Delete(s.Ctx, &claims[i]))).To(Succeed())
			}
		}
		g.Expect(claims).To(BeEmpty(), "NodeClaims of pool %s", pool)
		g.Expect(s.PoolGroups(pool)).To(BeEmpty(), "NodeGroups of pool %s", pool)
	}).WithTimeout(harness.CleanupTimeout).WithPolling(time.Second).Should(Succeed())
}

// A pod that needs a large flavor still gets it among steered CPU-heavy pods: 24 pods of
// 1 CPU / 512Mi arrive with one pod of 13 CPU (more than an L's 12) and one of 28Gi (more than
// an L's memory). Every pod runs, each large pod on an XL; once they are placed, CPU-heavy pods
// beyond the room the first nodes left (16 more than fit) get new NodeGroups of the 2XS only.
func TestPodNeedingALargeFlavorStillGetsIt(t *testing.T) {
	s := harness.NewScenario(t, env)
	pool, groups := openPool(s, time.Hour)

	small := s.Deployment("cpu-heavy", pool.Name, cpuHeavyPods, cpuHeavyCPU, cpuHeavyMemory)
	wideCPU := s.Deployment("large-cpu", pool.Name, 1, "13", "1Gi")
	wideMemory := s.Deployment("large-memory", pool.Name, 1, "1", "28Gi")

	start := time.Now()
	s.WaitRunning(small, cpuHeavyPods, burstTimeout)
	for _, d := range []*appsv1.Deployment{wideCPU, wideMemory} {
		pods := s.WaitRunning(d, 1, burstTimeout)
		Expect(podFlavors(s, pods)).To(Equal([]string{"XL"}), "the pod of %s runs on the only flavor that holds it", d.Name)
	}
	first := groups.All()
	t.Logf("burst with the large pods: %d groups %v in %s", len(first), harness.FlavorsOfRecords(first), time.Since(start).Round(100*time.Millisecond))

	// The large pods placed, more CPU-heavy pods are steered to the CPU-heavy shape. How the
	// first burst was packed depends on how core batched it, so the scale-up fills whatever room
	// its nodes have left and brings 16 pods more that only new nodes can hold.
	room := roomFor(s, pool.Name, cpuHeavyCPU, cpuHeavyMemory)
	more := int32(room) + 16
	s.Scale(small, cpuHeavyPods+more)
	start = time.Now()
	s.WaitRunning(small, int(cpuHeavyPods+more), burstTimeout)
	later := since(groups.All(), len(first))
	t.Logf("%d more CPU-heavy pods (%d fit the first nodes): %d new groups %v in %s", more, room, len(later), harness.FlavorsOfRecords(later), time.Since(start).Round(100*time.Millisecond))
	Expect(later).NotTo(BeEmpty(), "16 pods beyond the first nodes' room need new nodes")
	Expect(harness.FlavorsOfRecords(later)).To(HaveEach("2XS"), "new groups for CPU-heavy pods once the large ones are placed:\n%s", groups)
	for _, r := range groups.All() {
		Expect(r.Deleted.IsZero()).To(BeTrue(), "group %s (%s) deleted during the run", r.Name, r.Flavor)
	}
}

// Cost steering as shipped launches the CPU-heavy burst (24 pods of 1 CPU / 512Mi) on 2XS only,
// cheaper than the same burst with steering off (COST_STEERING=false, the controller restarted),
// where core packs it with every flavor, as it does without the provider's steering: an XL and
// an S (0.3111 EUR/h) against six 2XS (0.1998 EUR/h). The steering metric counts cost
// decisions with steering on, none with it off.
func TestCostSteeringOnIsCheaperThanOff(t *testing.T) {
	s := harness.NewScenario(t, env)
	pool, groups := openPool(s, time.Hour)

	// Steering on, as shipped.
	before := decisions(s, pool.Name, "cost")
	on := s.Deployment("cpu-heavy", pool.Name, cpuHeavyPods, cpuHeavyCPU, cpuHeavyMemory)
	start := time.Now()
	s.WaitRunning(on, cpuHeavyPods, burstTimeout)
	onTime := time.Since(start)
	steered := harness.FlavorsOfRecords(groups.All())
	onCost := hourly(s, steered)
	t.Logf("steering on: %d groups %v, %.4f EUR/h, pods Running in %s; cost decisions %v -> %v",
		len(steered), steered, onCost, onTime.Round(100*time.Millisecond), before, decisions(s, pool.Name, "cost"))
	Expect(decisions(s, pool.Name, "cost")).To(BeNumerically(">", before), "cost steering decided the burst's offer")
	Expect(steered).To(HaveEach("2XS"), "steered to the CPU-heavy shape:\n%s", groups)
	Expect(steered).To(HaveLen(cpuHeavyPods/4), "four pods to a 2XS")

	tearDown(s, pool.Name, on)

	// Steering off: every flavor offered, core's packing.
	// The raised quota kept; RaiseQuota's cleanup puts the suite's controller back.
	s.RestartController(map[string]string{"COST_STEERING": "false", "CLEVER_CLOUD_QUOTA_CPU": "200", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "200"})
	s.WaitPoolsReady(pool.Name)
	n := len(groups.All())
	off := s.Deployment("cpu-heavy-off", pool.Name, cpuHeavyPods, cpuHeavyCPU, cpuHeavyMemory)
	start = time.Now()
	s.WaitRunning(off, cpuHeavyPods, burstTimeout)
	offTime := time.Since(start)
	unsteered := harness.FlavorsOfRecords(since(groups.All(), n))
	offCost := hourly(s, unsteered)
	t.Logf("steering off: %d groups %v, %.4f EUR/h, pods Running in %s; decisions none=%v cost=%v",
		len(unsteered), unsteered, offCost, offTime.Round(100*time.Millisecond), decisions(s, pool.Name, "none"), decisions(s, pool.Name, "cost"))
	Expect(decisions(s, pool.Name, "cost")).To(BeZero(), "no cost decision with steering off")
	Expect(decisions(s, pool.Name, "none")).To(BeNumerically(">", 0), "the pool's offers were decided, unsteered")
	// Core's packing with every flavor: 16 pods fill an XL, the other 8 an S.
	Expect(unsteered).To(ConsistOf("XL", "S"), "core packs the burst onto the largest flavor:\n%s", groups)
	Expect(len(unsteered)).To(BeNumerically("<", len(steered)), "fewer, larger nodes without steering")
	Expect(onCost).To(BeNumerically("<", offCost), "steering on (%v) costs less than off (%v)", steered, unsteered)
}

// A workload whose shape changes mid-run converges without churn: CPU-heavy pods are steered
// to 2XS; once they run, memory-heavy pods (250m / 768Mi, 3 GB per vCPU) arrive and get nodes
// of their own shape (L or XL), not the 2XS the last offer held. The pool consolidates after
// 5 s, yet no node of the first wave is replaced or deleted: its NodeClaims, nodes and
// NodeGroups keep their names, its pods stay where they are, and Karpenter reports no
// disruption.
func TestShapeChangeConvergesWithoutChurn(t *testing.T) {
	s := harness.NewScenario(t, env)
	pool, groups := openPool(s, 5*time.Second)
	var gone []string
	_, claimWatch, err := harness.Record(s.Ctx, env.Client, &karpv1.NodeClaimList{}, func(ev harness.Event) {
		if ev.Type == watch.Deleted || ev.Object.GetDeletionTimestamp() != nil {
			gone = append(gone, ev.Object.GetName())
		}
	}, client.MatchingLabels{karpv1.NodePoolLabelKey: pool.Name})
	Expect(err).NotTo(HaveOccurred())
	stopped := false
	stopWatch := func() {
		if !stopped {
			stopped = true
			Expect(claimWatch.Stop()).To(Succeed(), "the NodeClaim watch lasted the run")
		}
	}
	t.Cleanup(stopWatch)

	cpu := s.Deployment("cpu-heavy", pool.Name, cpuHeavyPods, cpuHeavyCPU, cpuHeavyMemory)
	cpuPods := s.WaitRunning(cpu, cpuHeavyPods, burstTimeout)
	first := groups.All()
	Expect(harness.FlavorsOfRecords(first)).To(HaveEach("2XS"), "the CPU-heavy wave is steered:\n%s", groups)
	claims := s.WaitInitializedClaims(pool.Name, len(first))
	placed := map[string]string{}
	for _, p := range cpuPods {
		placed[p.Name] = p.Spec.NodeName
	}

	mem := s.Deployment("memory-heavy", pool.Name, 38, memHeavyCPU, memHeavyMemory)
	start := time.Now()
	memPods := s.WaitRunning(mem, 38, burstTimeout)
	later := since(groups.All(), len(first))
	t.Logf("first wave %v; memory-heavy wave: %d new groups %v in %s", harness.FlavorsOfRecords(first), len(later),
		harness.FlavorsOfRecords(later), time.Since(start).Round(100*time.Millisecond))
	Expect(later).NotTo(BeEmpty(), "the memory-heavy pods need new nodes")
	Expect(harness.FlavorsOfRecords(later)).To(HaveEach(BeElementOf("L", "XL")), "the memory-heavy shape:\n%s", groups)
	Expect(podFlavors(s, memPods)).To(HaveEach(BeElementOf("L", "XL")))

	// Long enough for consolidation to act (5 s, then Karpenter's validation): nothing moves.
	Consistently(func(g Gomega) {
		for _, c := range claims {
			got := &karpv1.NodeClaim{}
			g.Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(&c), got)).To(Succeed(), "NodeClaim %s of the first wave", c.Name)
			g.Expect(got.DeletionTimestamp).To(BeNil(), "NodeClaim %s of the first wave", c.Name)
			g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: c.Status.NodeName}, &corev1.Node{})).To(Succeed(), "node of %s", c.Name)
		}
		n, running := s.RunningPods(cpu)
		g.Expect(n).To(Equal(cpuHeavyPods))
		for _, p := range running {
			g.Expect(p.Spec.NodeName).To(Equal(placed[p.Name]), "pod %s moved", p.Name)
		}
	}).WithTimeout(40 * time.Second).WithPolling(time.Second).Should(Succeed())
	stopWatch()
	Expect(gone).To(BeEmpty(), "NodeClaims deleted during the run")
	for _, r := range groups.All() {
		Expect(r.Deleted.IsZero()).To(BeTrue(), "group %s (%s) deleted during the run", r.Name, r.Flavor)
	}
	for _, reason := range []string{"DisruptionLaunching", "DisruptionTerminating"} {
		var about []string
		for _, ev := range s.EventsSince(reason, "") {
			about = append(about, ev.InvolvedObject.Kind+" "+ev.InvolvedObject.Name+": "+ev.Message)
		}
		Expect(about).To(BeEmpty(), "Karpenter's %s events:\n%s", reason, strings.Join(about, "\n"))
	}
}

// A node that core filled with pods of another shape is replaced by cheaper nodes of theirs:
// the CPU-heavy burst is packed with steering off (an XL and an S, as core alone does), then
// the controller restarts as shipped but for the replacement's minimum node age (1 s in place
// of an hour: core asks whether a node drifted when its NodeClaim changes and every 5 minutes,
// so a node that comes of age between two checks waits for the next). The provider reports both nodes drifted (IllShaped), and Karpenter's drift
// replaces them with 2XS, which hold the same pods for at least steering.ReplaceSaving less.
// Each pod moves once: no node launched by the replacement is deleted.
func TestAnIllShapedNodeIsReplacedByCheaperNodes(t *testing.T) {
	s := harness.NewScenario(t, env)
	pool, groups := openPool(s, 5*time.Second)
	reasons := map[string]string{}
	var mu sync.Mutex
	_, claimWatch, err := harness.Record(s.Ctx, env.Client, &karpv1.NodeClaimList{}, func(ev harness.Event) {
		c, ok := ev.Object.(*karpv1.NodeClaim)
		if !ok {
			return
		}
		if cond := c.StatusConditions().Get(karpv1.ConditionTypeDrifted); cond.IsTrue() {
			mu.Lock()
			reasons[c.Name] = cond.Reason
			mu.Unlock()
		}
	}, client.MatchingLabels{karpv1.NodePoolLabelKey: pool.Name})
	Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = claimWatch.Stop() })
	quotaRaised := map[string]string{"CLEVER_CLOUD_QUOTA_CPU": "200", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "200"}

	s.RestartController(mergeEnv(quotaRaised, map[string]string{"COST_STEERING": "false"}))
	s.WaitPoolsReady(pool.Name)
	d := s.Deployment("cpu-heavy", pool.Name, cpuHeavyPods, cpuHeavyCPU, cpuHeavyMemory)
	s.WaitRunning(d, cpuHeavyPods, burstTimeout)
	packed := harness.FlavorsOfRecords(groups.All())
	Expect(packed).To(ConsistOf("XL", "S"), "core packs the burst onto the largest flavor:\n%s", groups)
	before := hourly(s, packed)
	n := len(groups.All())

	s.RestartController(mergeEnv(quotaRaised, map[string]string{"COST_REPLACEMENT_MIN_NODE_AGE": "1s"}))
	s.WaitPoolsReady(pool.Name)
	start := time.Now()
	var live []string
	Eventually(func(g Gomega) {
		live = nil
		for _, r := range groups.All() {
			if r.Deleted.IsZero() {
				live = append(live, r.Flavor)
			}
		}
		g.Expect(live).To(HaveEach("2XS"), "the pool's nodes")
		count, running := s.RunningPods(d)
		g.Expect(count).To(Equal(cpuHeavyPods))
		g.Expect(podFlavors(s, running)).To(HaveEach("2XS"))
	}).WithTimeout(2 * burstTimeout).WithPolling(2 * time.Second).Should(Succeed())
	after := hourly(s, live)
	replacements := since(groups.All(), n)
	t.Logf("packed %v (%.4f EUR/h); replaced in %s by %v (%.4f EUR/h); drift reasons %v", packed, before,
		time.Since(start).Round(time.Second), harness.FlavorsOfRecords(replacements), after, reasons)
	Expect(after).To(BeNumerically("<=", before*(1-steering.ReplaceSaving)), "the replacement saves what it promised")
	mu.Lock()
	Expect(slices.Collect(maps.Values(reasons))).To(HaveEach(Equal(string(cloudprovider.DriftReasonIllShaped))), "why Karpenter replaced them")
	Expect(reasons).To(HaveLen(2), "the XL and the S reported drifted")
	mu.Unlock()
	for _, r := range replacements {
		Expect(r.Deleted.IsZero()).To(BeTrue(), "replacement group %s (%s) deleted: a pod moved twice", r.Name, r.Flavor)
	}
}

// mergeEnv returns the variables of every map, later maps winning.
func mergeEnv(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// A pod whose node selector asks for a flavor gets it among steered CPU-heavy pods: one pod
// selecting node.kubernetes.io/instance-type L arrives with the 24 CPU-heavy pods, and runs
// on an L whatever the steering offers the others.
func TestPodAskingForAFlavorGetsIt(t *testing.T) {
	s := harness.NewScenario(t, env)
	pool, groups := openPool(s, time.Hour)

	small := s.Deployment("cpu-heavy", pool.Name, cpuHeavyPods, cpuHeavyCPU, cpuHeavyMemory)
	pinned := s.Deployment("pinned", pool.Name, 1, cpuHeavyCPU, cpuHeavyMemory, onFlavor("L"))
	s.WaitRunning(small, cpuHeavyPods, burstTimeout)
	pods := s.WaitRunning(pinned, 1, burstTimeout)
	t.Logf("groups %v", harness.FlavorsOfRecords(groups.All()))
	Expect(podFlavors(s, pods)).To(Equal([]string{"L"}), "the pod selecting an L:\n%s", groups)
}

// openPool raises the quota out of the way (the bill alone steers), and creates a class and an
// on-demand NodePool open to every flavor that consolidates after consolidateAfter, with a
// recorder of its NodeGroups.
func openPool(s *harness.Scenario, consolidateAfter time.Duration) (*karpv1.NodePool, *harness.GroupRecorder) {
	s.T.Helper()
	s.RaiseQuota()
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, consolidateAfter, harness.OnDemand)
	return pool, s.RecordGroups(pool.Name, nil)
}
