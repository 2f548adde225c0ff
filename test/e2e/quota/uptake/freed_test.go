package uptake

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	ctrlquota "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// leak is how long this platform's quota engine keeps a refused reservation: twice the
// simulator's live value, well within the 1 to 10 minutes the provider covers untuned.
const leak = 6 * time.Minute

// CKE's default quota (40 / 40, the control plane using 16 / 24), another cluster of the
// organisation using 12 vCPU / 12 GB of it unseen, batch judging on and 6-minute leaks. Two
// one-per-node pods: their 2XS launches, sure to fit the default but only assumed, fly
// together and are refused together — two refused groups, no more. Then the other cluster
// scales down. The provider cannot see that: it waits out the suspected leaks (no probe into
// them), then probes, and both pods get their NodeGroups within quota.UptakeBound of the free.
func TestAnotherClusterFreesQuotaAndItIsFound(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor)`,
		`could not schedule pod`, harness.ProbeWaitRetried)
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		harness.PlatformQuirks(o)
		o.LeakedReservationTTL = leak
		o.OtherClusterCPU, o.OtherClusterGB = 12, 12
	})
	t.Cleanup(func() {
		env.Cluster.Operator().Configure(func(o *operator.Options) { o.OtherClusterCPU, o.OtherClusterGB = 0, 0 })
	})
	s.FreshController(nil)

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	groups := s.RecordGroups(pool.Name, nil)
	d := s.Deployment("waiting", pool.Name, 2, "1", "1Gi", harness.OnePerNode)
	Eventually(func() []harness.GroupRecord { return groups.Refused() }).WithTimeout(harness.LaunchTimeout).WithPolling(500 * time.Millisecond).ShouldNot(BeEmpty())
	firstRefusal := groups.Refused()[0].Decided

	// The other cluster scales down a minute later; the engine still holds the refused
	// reservations for the rest of its leak.
	Eventually(func() time.Duration { return time.Since(firstRefusal) }).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(BeNumerically(">=", time.Minute))
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.OtherClusterCPU, o.OtherClusterGB = 0, 0 })
	freed := time.Now()

	s.WaitRunning(d, 2, ctrlquota.UptakeBound+2*harness.LaunchTimeout)
	t.Logf("both pods Running %s after the other cluster scaled down, %s after the first refusal (suspected leak %s, the platform's %s)",
		time.Since(freed).Round(time.Second), time.Since(firstRefusal).Round(time.Second), ctrlquota.LeakLifetime, leak)

	refused := groups.Refused()
	Expect(len(refused)).To(BeNumerically("<=", ctrlquota.AssumedInFlight), "refused groups: the first batch on the assumed default, and nothing after")
	var created []harness.GroupRecord
	for _, r := range groups.All() {
		if r.Created.After(firstRefusal) {
			created = append(created, r)
		}
	}
	Expect(created).NotTo(BeEmpty())
	for _, r := range created {
		Expect(r.Created.Sub(firstRefusal)).To(BeNumerically(">=", ctrlquota.LeakLifetime-5*time.Second), "%s created while a leak was suspected", r.Name)
		Expect(r.Created.Sub(freed)).To(BeNumerically("<=", ctrlquota.UptakeBound), "%s created later than the uptake bound after the free", r.Name)
	}
}
