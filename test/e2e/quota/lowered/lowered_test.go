package lowered

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	ctrlquota "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// A round of refusals is the refusals the engine gave within this long of the first: the
// launches made together, before any verdict could teach the controller anything.
const roundSpread = 30 * time.Second

// The organisation has less than CKE's default — 40 vCPU / 32 GB, the control plane using
// 16 / 24 of it — and the controller is not told; the quota engine judges concurrent
// creations together and keeps refused reservations for minutes, as live. Four one-per-node
// pods, each a 2XS: the first round, sure to fit the default, is refused (together: the batch
// overflows); the controller charges the refused reservations as suspected leaks, then probes
// one 2XS at a time until one is refused. Two pods run, two stay Pending, and while that demand
// persists the engine sees no create → refuse → delete cycle every few minutes: one more
// refusal at most, the probe that found the limit, and never while a leak was suspected.
func TestQuotaBelowTheDefaultIsRefusedBoundedly(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom)`, harness.ProbeWaitRetried,
		`could not schedule pod`)
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		harness.PlatformQuirks(o)
		o.QuotaRAMGB = 32
	})
	s.FreshController(nil)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	groups := s.RecordGroups(pool.Name, nil)
	d := s.Deployment("overflow", pool.Name, 4, "1", "1Gi", harness.OnePerNode)

	Eventually(func() []harness.GroupRecord { return groups.Refused() }).WithTimeout(harness.LaunchTimeout).WithPolling(500 * time.Millisecond).ShouldNot(BeEmpty())
	firstRefusal := groups.Refused()[0].Decided
	// G1: the suspected leaks expire, then a verdict per probe and a node's join.
	Eventually(func() int {
		n, _ := s.RunningPods(d)
		return n
	}).WithTimeout(ctrlquota.LeakLifetime+2*harness.LaunchTimeout).WithPolling(time.Second).Should(Equal(2), "running pods")
	t.Logf("two pods Running %s after the first refusal", time.Since(firstRefusal).Round(time.Second))

	// The demand persists well beyond the leaks' lifetime: three more minutes after it, longer
	// than the refusal memory of the controllers that cycled.
	window := firstRefusal.Add(ctrlquota.LeakLifetime + 3*time.Minute)
	Consistently(func(g Gomega) {
		running, _ := s.RunningPods(d)
		g.Expect(running).To(Equal(2), "running pods")
		pending := 0
		for _, p := range s.Pods(d) {
			if p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" {
				pending++
			}
		}
		g.Expect(pending).To(Equal(2), "pending pods")
	}).WithTimeout(time.Until(window)).WithPolling(2 * time.Second).Should(Succeed())

	refused := groups.Refused()
	var round, later []harness.GroupRecord
	for _, r := range refused {
		if r.Decided.Sub(firstRefusal) <= roundSpread {
			round = append(round, r)
		} else {
			later = append(later, r)
		}
	}
	t.Logf("%s of demand above the quota: %d NodeGroups created, %d refused in the first round, %d later", time.Since(firstRefusal).Round(time.Second), groups.Created(), len(round), len(later))
	for _, r := range later {
		t.Logf("later refusal: %s (%s) created %s after the first refusal", r.Name, r.Flavor, r.Created.Sub(firstRefusal).Round(time.Second))
	}
	Expect(float64(len(refused))).To(Equal(s.QuotaRefusals()), "refusals the controller counted")
	Expect(len(round)).To(BeNumerically("<=", 4), "refusals in the first round: at most one per pending pod")
	Expect(len(later)).To(BeNumerically("<=", 1), "refusals after the first round: the probe that found the limit, once")
	// Nothing flies while a refused reservation may still be held upstream: every creation
	// after a refusal waits out the suspected leak (the watch and the controller see a verdict
	// a little apart).
	for _, r := range groups.All() {
		var after time.Time
		for _, x := range refused {
			if x.Decided.Before(r.Created) && x.Decided.After(after) {
				after = x.Decided
			}
		}
		if !after.IsZero() {
			Expect(r.Created.Sub(after)).To(BeNumerically(">=", ctrlquota.LeakLifetime-5*time.Second), "%s created while a leak was suspected", r.Name)
		}
	}
}
