package harness

import (
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
)

// PlatformQuirks turns on what CKE's quota engine does live (sim.LiveOptions): creations
// made within a second of each other are judged together and refused together, and the
// reservation of a refused group, or of a group deleted before it was built, is kept for
// minutes after the group is gone. The suites' fast profile has both off.
func PlatformQuirks(o *operator.Options) {
	live := sim.LiveOptions().Operator
	o.QuotaBatchWindow, o.LeakedReservationTTL = live.QuotaBatchWindow, live.LeakedReservationTTL
}

// ProbeWaitRetried is the controller error line, for AllowErrors, of a launch that waited
// behind a quota probe for the acceptance timeout: core logs the Create error and retries the
// same claim (cloudprovider.ConditionReasonAwaitingQuotaVerdict).
const ProbeWaitRetried = `Reconciler error.*quota probe was still awaiting its verdict after .*; retrying`

// FreshController restarts the controller with overrides, and again with none when the test
// ends (before the scenario's cleanup), each time without what it saved of the quota: each
// scenario starts from a controller that knows nothing and leaves the next one the same.
func (s *Scenario) FreshController(overrides map[string]string) {
	s.T.Helper()
	s.T.Cleanup(func() {
		s.must(s.Env.ForgetQuotaState(s.Ctx))
		s.RestartController(nil)
	})
	s.must(s.Env.ForgetQuotaState(s.Ctx))
	s.RestartController(overrides)
}

// QuotaRefusals counts the NodeGroups the platform's quota engine refused since the
// controller started, as the controller counted them.
func (s *Scenario) QuotaRefusals() float64 {
	s.T.Helper()
	return s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"outcome": "QuotaExceeded"})
}

// RaiseQuota gives the organisation room for the large flavors and tells the controller so;
// the suite's controller is put back when the test ends, before the scenario's cleanup.
func (s *Scenario) RaiseQuota() {
	s.T.Helper()
	s.Env.Cluster.Operator().Configure(func(o *operator.Options) { o.QuotaCPU, o.QuotaRAMGB = 200, 200 })
	s.RestartController(map[string]string{"CLEVER_CLOUD_QUOTA_CPU": "200", "CLEVER_CLOUD_QUOTA_MEMORY_GB": "200"})
	s.T.Cleanup(func() { s.RestartController(nil) })
}

// ExpectProbedNoSoonerThanItsMemory asserts, for a while, that d's pods stay Pending and
// unbound, and that the pool's refused creations are all of flavor, each sent no sooner than
// the quota's refusal memory after the previous one's verdict: a use the platform refuses is
// asked about again, so that a quota freed meanwhile is found, but never in a loop.
func (s *Scenario) ExpectProbedNoSoonerThanItsMemory(d *appsv1.Deployment, groups *GroupRecorder, flavor string) {
	s.T.Helper()
	s.G.Consistently(func(g gomega.Gomega) {
		for _, p := range s.Pods(d) {
			g.Expect(p.Status.Phase).To(gomega.Equal(corev1.PodPending))
			g.Expect(p.Spec.NodeName).To(gomega.BeEmpty())
		}
	}).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(gomega.Succeed())
	refused := groups.Refused()
	s.G.Expect(FlavorsOfRecords(refused)).To(gomega.HaveEach(flavor), "refused creations, as the platform wrote them")
	for i := 1; i < len(refused); i++ {
		s.G.Expect(refused[i].Created.Sub(refused[i-1].Decided)).To(gomega.BeNumerically(">=", quota.RefusalMemory-5*time.Second),
			"%s probed again before the refused use was forgotten", refused[i].Name)
	}
}
