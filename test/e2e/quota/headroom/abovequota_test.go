package headroom

import (
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	ctrlquota "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// quotaWindow is how long demand above the quota is watched for retry storms: three of
// Karpenter's provisioning loops and more. A launch retried on every loop would show as
// several cycles; the refused use is ruled out for far longer (ctrlquota.RefusalMemory).
const quotaWindow = 30 * time.Second

// Organisation quota: room for two 2XS only (the two S control-plane nodes use 24 of 32 GB).
// Four one-per-node pods: two run, two stay Pending; the refused groups are deleted, the
// claims fail with InsufficientCapacity, and the create/reject cycles stay bounded while the
// demand persists. The refusals say nothing (today's empty message): the controller learns
// that the use they would have brought is refused, in both resources, and that no limit can
// be pinned from them, since neither resource was proven to fit at that use.
func TestDemandAboveTheQuotaIsRefusedWithoutRetryStorms(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Karpenter core logs every InsufficientCapacity launch failure at error level.
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom)`,
		// and every pod it cannot place while every flavor is marked unavailable.
		`could not schedule pod.*all available instance types`)
	// The quota is lowered to 32 GB here, under a controller that may have seen 40 GB accepted
	// in an earlier scenario (a proof it keeps for ctrlquota.ProofLifetime): start from one
	// that knows nothing, as a cluster whose quota was always 32 GB would.
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.QuotaRAMGB = 32 })
	s.FreshController(nil)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)
	d := s.Deployment("overflow", pool.Name, 4, "1", "1Gi", harness.OnePerNode)

	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(cloudprovider.ReasonQuotaExceeded, "")).NotTo(BeEmpty(), "quota events")
		g.Expect(s.EventsSince("InsufficientCapacityError", "")).NotTo(BeEmpty(), "InsufficientCapacity events")
		n, _ := s.RunningPods(d)
		g.Expect(n).To(Equal(2), "running pods")
	}).WithTimeout(harness.LaunchTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	ev := s.EventsSince(cloudprovider.ReasonQuotaExceeded, "")[0]
	t.Logf("refusal event: %s", ev.Message)
	// Four 2XS in flight together beyond the control plane: 32 vCPU / 40 GB at most, within
	// CKE's default (40 / 40) but neither resource proven to fit there (the accepted use is at
	// most 24 / 32): the use is ruled out, no limit is claimed.
	Expect(ev.Message).To(MatchRegexp(`^Organisation quota refused NodeGroup \S+ \(flavor 2XS\): it would have brought the use to at most \d+ vCPU / \d+ GB; launches that would bring it that far in both resources are not made for ` +
		regexp.QuoteMeta(ctrlquota.RefusalMemory.String()) + `$`))

	start := time.Now()
	first := s.QuotaRefusals()
	// While the demand persists: two pods Pending and unbound, no refused group left behind,
	// exactly the two accepted groups.
	Consistently(func(g Gomega) {
		running, _ := s.RunningPods(d)
		g.Expect(running).To(Equal(2))
		pending := 0
		for _, p := range s.Pods(d) {
			if p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" {
				pending++
			}
		}
		g.Expect(pending).To(Equal(2), "pending pods")
		groups := s.PoolGroups(pool.Name)
		accepted := 0
		for _, gr := range groups {
			// Accepted: Creating from the decision on, Synced once the VM is built.
			if gr.Status.Phase == ngv1.PhaseCreating || gr.Status.Phase == ngv1.PhaseSynced {
				accepted++
			}
		}
		g.Expect(accepted).To(Equal(2), "accepted NodeGroups")
		for _, gr := range groups {
			if gr.Status.Phase == ngv1.PhaseQuotaExceeded {
				// A refused group may be seen between the verdict and the provider's delete,
				// never after.
				g.Expect(gr.DeletionTimestamp).NotTo(BeNil(), "refused NodeGroup %s not being deleted", gr.Name)
			}
		}
	}).WithTimeout(quotaWindow).WithPolling(time.Second).Should(Succeed())
	total := s.QuotaRefusals()
	t.Logf("quota: %.0f create/reject cycles before the window, %.0f in total after %s of demand above quota", first, total, time.Since(start).Round(time.Second))
	// The refused use stays ruled out (ctrlquota.RefusalMemory) and the refused groups'
	// reservations are charged as suspected leaks (ctrlquota.LeakLifetime): beyond the first
	// burst (one per pending pod), no further cycle in the window.
	Expect(total).To(BeNumerically("<=", 4), "create/reject cycles")
	Expect(total-first).To(BeNumerically("<=", 2), "create/reject cycles during the window")
	// Neither resource was proven to fit at the refused use, so none is named.
	Expect(s.Metric("karpenter_clevercloud_nodegroup_quota_rejections_total", map[string]string{"resource": ctrlquota.ResourceUnknown})).To(Equal(total))
	Expect(s.Metric("karpenter_clevercloud_quota_refusals_remembered", nil)).To(BeNumerically(">=", 1))
}
