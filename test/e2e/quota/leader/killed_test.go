package leader

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotastate"
	ctrlquota "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// With CKE's default quota, no quota configured and the quota engine's quirks on, an XL is
// refused and its reservation leaks upstream. The leader is killed (SIGKILL: nothing flushed
// on the way out) while the leak is suspected and the refused use locked out, and a new one
// starts. It restores what its predecessor saved: a 2XS that would be a probe beside the leak
// is not sent until the suspected leak would have ended (no second refusal), and then it is
// (no lockout longer than before). Before the quota memory was saved, the new leader knew
// nothing: it probed with the 2XS straight into the leak and the engine refused it too.
func TestANewLeaderSendsNoProbeIntoItsPredecessorsLeak(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`failed launching nodeclaim.*(Quota exceeded|headroom|no available flavor)`,
		`could not schedule pod`, harness.ProbeWaitRetried)
	env.Cluster.Operator().Configure(harness.PlatformQuirks)
	s.FreshController(nil)
	before := s.QuotaRefusals()

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute, harness.OnDemand)
	groups := s.RecordGroups(pool.Name, nil)
	s.Deployment("xl", pool.Name, 1, "13", "1Gi") // 13 vCPU: only an XL holds it
	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(cloudprovider.ReasonQuotaExceeded, "")).NotTo(BeEmpty())
	}).WithTimeout(harness.LaunchTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	refused := time.Now()

	// The leader saves what it learned; then it dies without a word.
	key, err := s.Env.QuotaStateKey()
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(s.Env.Client.Get(s.Ctx, key, cm)).To(Succeed())
		var snap ctrlquota.Snapshot
		g.Expect(json.Unmarshal([]byte(cm.Data[quotastate.KeySnapshot]), &snap)).To(Succeed())
		g.Expect(snap.Leaks).NotTo(BeEmpty())
		g.Expect(snap.Refused).NotTo(BeEmpty())
	}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
	Expect(s.Env.Controller().Kill()).To(Succeed())
	s.RestartController(nil)
	restarted := time.Now()

	small := s.Deployment("small", pool.Name, 1, "1", "1Gi")
	// The new leader holds the 2XS while its predecessor's suspected leak lasts...
	Consistently(func(g Gomega) {
		g.Expect(s.PoolFlavors(pool.Name)).NotTo(ContainElement("2XS"))
	}).WithTimeout(time.Until(refused.Add(ctrlquota.LeakLifetime - 30*time.Second))).WithPolling(2 * time.Second).Should(Succeed())
	// ...and launches it once the leak would have ended: no longer than without the restart.
	s.WaitRunning(small, 1, time.Until(refused.Add(ctrlquota.LeakLifetime+harness.LaunchTimeout)))
	t.Logf("the 2XS ran %s after the XL was refused, %s after the leader was replaced (suspected leak: %s)",
		time.Since(refused).Round(time.Second), time.Since(restarted).Round(time.Second), ctrlquota.LeakLifetime)
	Expect(s.QuotaRefusals()-before).To(BeNumerically("==", 0), "the new leader's own count: it was refused nothing")
	Expect(harness.FlavorsOfRecords(groups.Refused())).To(Equal([]string{"XL"}), "refused creations, as the platform wrote them: the XL alone")
}
