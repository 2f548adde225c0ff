package cloudprovider_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	provider "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

func rejections(g Gomega, flavor, resource string) float64 {
	var m dto.Metric
	g.Expect(provider.QuotaRejections.WithLabelValues(flavor, resource).Write(&m)).To(Succeed())
	return m.GetCounter().GetValue()
}

// controlPlane is two S control-plane nodes, accepted by the quota long ago.
var controlPlane = quota.Observation{Usage: quota.Usage{CPU: 16, GB: 24}, Proven: quota.Usage{CPU: 16, GB: 24}}

func quotaOffered(g Gomega, f *fixture, pool *karpv1.NodePool) map[string]bool {
	its, err := f.provider.GetInstanceTypes(context.Background(), pool)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]bool{}
	for _, it := range its {
		out[it.Name] = len(it.Offerings.Available()) > 0
	}
	return out
}

// Today's platform refuses with an empty message: the use the refused launch would have
// brought is ruled out, and nothing that would reach it is offered afterwards.
func TestARefusalWithoutMessageInfersTheLimit(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	f.quota.Record(controlPlane)
	before := rejections(g, "XL", "unknown")

	nc := f.newClaim(g, "13", "1Gi") // only an XL holds 13 vCPU
	done := f.create(nc)
	group := awaitGroup(g, nc.Name)
	g.Expect(group.Spec.Flavor).To(Equal("XL"))
	verdict(g, group, ngv1.PhaseQuotaExceeded, quotaExceeded(""))
	var r result
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(cloudprovider.IsInsufficientCapacityError(r.Err)).To(BeTrue(), "got %v", r.Err)
	g.Expect(r.Err.Error()).To(ContainSubstring("Quota exceeded"))

	// 32 vCPU / 56 GB were refused; neither resource is proven to fit, so neither is pinned:
	// that use and beyond is ruled out.
	g.Expect(f.quota.Limit()).To(Equal(quota.Limit{}))
	g.Expect(rejections(g, "XL", "unknown") - before).To(Equal(1.0))
	g.Expect(drainEvents(f.events)).To(ContainElement(SatisfyAll(
		ContainSubstring(provider.ReasonQuotaExceeded),
		ContainSubstring("flavor XL"),
		ContainSubstring("at most 32 vCPU / 56 GB"),
		ContainSubstring("not made for "+quota.RefusalMemory.String()),
	)))
	// While the XL's reservation may leak, nothing is offered beside it; then everything, the
	// XL's refused use forgotten with its leak.
	g.Expect(quotaOffered(g, f, nil)).To(Equal(map[string]bool{"2XS": false, "XS": false, "S": false, "M": false, "L": false, "XL": false}))
	f.clock.Step(quota.LeakLifetime)
	g.Expect(quotaOffered(g, f, nil)).To(Equal(map[string]bool{"2XS": true, "XS": true, "S": true, "M": true, "L": true, "XL": true}))
}

// pendingPods creates n pods the scheduler marked unschedulable, as Karpenter sees them, and
// deletes them when the test ends (every test of the package shares the apiserver).
func pendingPods(t *testing.T, g Gomega, n int, cpu, memory string) {
	pendingPodsNamed(t, g, "pending", n, cpu, memory)
}

// pendingPod creates one pending pod with a node selector; the caller deletes it.
func pendingPod(g Gomega, name string, selector map[string]string, cpu, memory string) *corev1.Pod {
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		}}}},
	}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
	return p
}

func pendingPodsNamed(t *testing.T, g Gomega, prefix string, n int, cpu, memory string) {
	ctx := context.Background()
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
			}}}},
		}
		g.Expect(env.Client.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(ctx, p, &client.DeleteOptions{GracePeriodSeconds: new(int64)}) })
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
	}
}

// Core starts a scheduling pass once no new pending pod came for its batch idle duration: a
// look at the pending pods older than that may miss the last of them. Three pods fit an M;
// with nine more, an M would hold ten of the twelve and strand two, so it is steered away
// once the look is half the idle duration old, not steeringTTL.
func TestTheSteeringSeesEveryPodOfTheSchedulingPass(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	f.provider.SetBatchIdleDuration(time.Second)
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "batched"}}
	f.quota.Record(controlPlane)
	f.quota.Learn("CPU", 40)
	f.quota.Learn("RAM", 40)

	pendingPodsNamed(t, g, "first", 3, "1", "1Gi")
	g.Expect(quotaOffered(g, f, pool)["M"]).To(BeTrue(), "an M holds the three")
	pendingPodsNamed(t, g, "more", 9, "1", "1Gi")
	f.clock.Step(400 * time.Millisecond)
	g.Expect(quotaOffered(g, f, pool)["M"]).To(BeTrue(), "within half the idle duration, one look serves")
	f.clock.Step(200 * time.Millisecond)
	g.Expect(quotaOffered(g, f, pool)).To(Equal(map[string]bool{"2XS": true, "XS": true, "S": false, "M": false, "L": false, "XL": false}),
		"half the idle duration later, the twelve are seen")
	g.Expect(provider.SteeringTTL).To(BeNumerically(">", 600*time.Millisecond), "the default look would still serve")
}

// With the quota binding, the flavors that hold the most of the pending pods in the
// headroom are offered, so Karpenter does not strand the vCPU headroom on an M.
func TestTheOfferingsSteerPendingPodsToTheFlavorsThatHoldTheMost(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	// The quota's part of steering alone: cost steering would also set the large flavors
	// aside for these 1 vCPU / 1 GiB pods (TestTheOfferingsSteerToTheCheapestFleet).
	f.provider.SetCostSteering(false)
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "steered"}}
	f.quota.Record(controlPlane)

	// Limit unknown: CKE's default quota is provisional, and its headroom (24 / 16) holds the
	// twelve on four 2XS or two XS. Karpenter would pack them onto an L, a probe the default
	// quota refuses and whose reservation the quota engine may keep for minutes, taking every
	// GB left: the flavors within the headroom that hold them all are offered instead.
	pendingPods(t, g, 12, "1", "1Gi")
	g.Expect(quotaOffered(g, f, pool)).To(Equal(map[string]bool{"2XS": true, "XS": true, "S": false, "M": false, "L": false, "XL": false}))
	g.Expect(f.quota.Limit()).To(Equal(quota.Limit{}), "nothing learned: the limit is still unknown")
	// More than the provisional headroom holds (another pool's use): nothing is steered away,
	// so a probe can find a raised quota; but a probe is the smallest flavor a pending pod can
	// use (it leaks least and proves most), so the flavors beyond CKE's default are offered
	// only up to the 2XS that holds one of the pods.
	f.quota.Record(quota.Observation{Usage: quota.Usage{CPU: 30, GB: 32}, Proven: quota.Usage{CPU: 30, GB: 32}})
	f.clock.Step(provider.SteeringTTL)
	g.Expect(quotaOffered(g, f, pool)).To(Equal(map[string]bool{"2XS": true, "XS": true, "S": false, "M": false, "L": false, "XL": false}))
	g.Expect(drainEvents(f.events)).NotTo(ContainElement(ContainSubstring(provider.ReasonWaitingOnQuota)), "a 2XS may still launch: no pod waits on the quota")
	// A pool with minValues is left whole: fewer flavors would fail it, a probe costs less.
	f.quota.Record(controlPlane)
	f.clock.Step(provider.SteeringTTL)
	minValues := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "min-values"}}
	minValues.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{
		Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpExists, MinValues: new(3),
	}}
	g.Expect(quotaOffered(g, f, minValues)).To(Equal(map[string]bool{"2XS": true, "XS": true, "S": true, "M": true, "L": true, "XL": true}))

	// 40 / 40 known, 24 vCPU / 16 GB left: an M would hold ten of the twelve, four 2XS or
	// two XS hold them all.
	f.quota.Learn("CPU", 40)
	f.quota.Learn("RAM", 40)
	g.Expect(quotaOffered(g, f, pool)).To(Equal(map[string]bool{"2XS": true, "XS": true, "S": false, "M": false, "L": false, "XL": false}))
	g.Expect(drainEvents(f.events)).To(ContainElement(SatisfyAll(ContainSubstring(provider.ReasonQuotaLimited), ContainSubstring("S, M"))))

	// A pool that only allows S and M: of those, the M holds more.
	restricted := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "s-or-m"}}
	restricted.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{
		Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"S", "M"},
	}}
	got := quotaOffered(g, f, restricted)
	g.Expect(got["M"]).To(BeTrue())
	g.Expect(got["S"]).To(BeFalse())

	// Ample headroom: every flavor that fits is offered.
	f.quota.Record(quota.Observation{})
	f.clock.Step(provider.SteeringTTL)
	g.Expect(quotaOffered(g, f, pool)).To(Equal(map[string]bool{"2XS": true, "XS": true, "S": true, "M": true, "L": true, "XL": true}))
}

// With the quota out of the way, the offerings steer the pass to the flavors whose packing
// costs the least: CPU-heavy pods get the 2XS's shape instead of filling XLs whose memory
// they leave idle. A flavor a pod needs, by its size or by its node selector, stays offered;
// hidden flavors are not reported as the quota's; cost steering off offers every flavor.
func TestTheOfferingsSteerToTheCheapestFleet(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "cost"}}
	f.quota.Record(quota.Observation{})
	all := map[string]bool{"2XS": true, "XS": true, "S": true, "M": true, "L": true, "XL": true}

	pendingPodsNamed(t, g, "cpu-heavy", 12, "1", "512Mi")
	g.Expect(quotaOffered(g, f, pool)).To(Equal(map[string]bool{"2XS": true, "XS": false, "S": false, "M": false, "L": false, "XL": false}))
	g.Expect(drainEvents(f.events)).NotTo(ContainElement(ContainSubstring(provider.ReasonQuotaLimited)), "the quota has nothing to do with it")

	f.provider.SetCostSteering(false)
	g.Expect(quotaOffered(g, f, pool)).To(Equal(all), "cost steering off")
	f.provider.SetCostSteering(true)

	// A pod only another pool can take does not shape this pool's offer, however large.
	ctx := context.Background()
	elsewhere := pendingPod(g, "elsewhere", map[string]string{karpv1.NodePoolLabelKey: "another-pool"}, "13", "1Gi")
	t.Cleanup(func() { _ = env.Client.Delete(ctx, elsewhere, &client.DeleteOptions{GracePeriodSeconds: new(int64)}) })
	f.clock.Step(provider.SteeringTTL)
	g.Expect(quotaOffered(g, f, pool)).To(Equal(map[string]bool{"2XS": true, "XS": false, "S": false, "M": false, "L": false, "XL": false}))

	// A small pod whose node selector asks for an L keeps the L offered.
	pinned := pendingPod(g, "wants-an-l", map[string]string{corev1.LabelInstanceTypeStable: "L"}, "100m", "128Mi")
	t.Cleanup(func() { _ = env.Client.Delete(ctx, pinned, &client.DeleteOptions{GracePeriodSeconds: new(int64)}) })
	f.clock.Step(provider.SteeringTTL)
	g.Expect(quotaOffered(g, f, pool)).To(HaveKeyWithValue("L", true), "the pod that asks for an L")

	// A pod only an XL holds: with the XL offered for it, core would fill every node it plans
	// up to an XL anyway, so nothing is hidden this pass.
	pendingPodsNamed(t, g, "large", 1, "13", "1Gi")
	f.clock.Step(provider.SteeringTTL)
	g.Expect(quotaOffered(g, f, pool)).To(HaveKeyWithValue("XL", true))
}

// A pod whose smallest flavor the quota keeps from launching is told so on its own events:
// that it waits on the quota, when the next attempt comes, and what ends the wait.
func TestAPodWaitingOnTheQuotaIsToldWhyAndUntilWhen(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "waiting"}}
	f.quota.Record(controlPlane)

	// An XL is refused: its reservation may leak, so nothing launches until it would end.
	nc := f.newClaim(g, "13", "1Gi")
	done := f.create(nc)
	verdict(g, awaitGroup(g, nc.Name), ngv1.PhaseQuotaExceeded, quotaExceeded(""))
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive())
	drainEvents(f.events)

	pendingPodsNamed(t, g, "waiter", 1, "1", "1Gi")
	quotaOffered(g, f, pool)
	g.Expect(drainEvents(f.events)).To(ContainElement(SatisfyAll(
		ContainSubstring(provider.ReasonWaitingOnQuota),
		ContainSubstring("Next attempt no sooner than"),
		ContainSubstring("settings.quota"),
	)))

	// Once the leak would have ended, the 2XS may be probed: the pod no longer waits.
	f.clock.Step(quota.LeakLifetime)
	quotaOffered(g, f, pool)
	g.Expect(drainEvents(f.events)).NotTo(ContainElement(ContainSubstring(provider.ReasonWaitingOnQuota)))
}

// While the quota is not known, a probe beyond CKE's default is the smallest flavor a pending
// pod can use, and the pass's own look at the pods sets that ceiling: a flavor beyond it is not
// offered on that very pass. Offered, core packs a 1-vCPU pod beside a 13-vCPU one onto the XL,
// Create refuses the XL as a probe larger than the 2XS, and the next pass, ten seconds later
// when the ceiling from the last look has lapsed, does the same: the small pod never runs.
func TestAFlavorBeyondTheProbeCeilingIsNotOfferedOnThePassThatSetsIt(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	f.provider.SetCostSteering(false)
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "probe-ceiling"}}
	f.quota.Record(controlPlane)
	pendingPodsNamed(t, g, "needs-an-xl", 1, "13", "1Gi")
	pendingPodsNamed(t, g, "small", 1, "1", "1Gi")

	for pass := range 3 {
		offered := quotaOffered(g, f, pool)
		g.Expect(offered).To(HaveKeyWithValue("2XS", true), "pass %d: the small pod's probe", pass)
		g.Expect(offered).To(HaveKeyWithValue("XL", false), "pass %d: beyond the 2XS a probe may be", pass)
		f.clock.Step(11 * time.Second) // core's passes come every 10 s while pods wait
	}
}
