package inspect

import (
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// refusedAside is how long the controller sets a flavor aside after a first refusal it cannot
// classify (cloudprovider's refusedTTL, which its NodeGroupRefused event names).
const refusedAside = 3 * time.Minute

// The operator refuses a group for a reason the provider does not know: the flavor is set
// aside, the pod waits, and explain names the refusal and when the flavor is offered again.
// It runs after the scenarios that launch a 2XS: the controller remembers the refusal.
func TestExplainSaysARefusedFlavorIsSetAsideAndUntilWhen(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Core logs the failed launch, and the pod it cannot place while 2XS is set aside.
	s.AllowErrors(`failed launching nodeclaim.*refused`, `could not schedule pod`)
	binary, err := stack.ControllerBinary(s.Ctx, t.TempDir())
	Expect(err).NotTo(HaveOccurred())
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.Faults = []operator.Fault{operator.FaultUnknownRefusal} })
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS"}, time.Hour, harness.OnDemand)
	d := s.Deployment("refused", pool.Name, 1, "1", "1Gi")
	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(cloudprovider.ReasonRefused, "")).NotTo(BeEmpty())
		g.Expect(s.PoolFlavors(pool.Name)).To(BeEmpty(), "the refused group is deleted")
	}).WithTimeout(harness.LaunchTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	refusedAt := time.Now()

	out := run(Default, binary, "explain", podOf(s, d), "-n", s.Namespace)
	t.Logf("explain refused:\n%s", out)
	m := regexp.MustCompile(`(?m)^  2XS  0\.0333 EUR/h  excluded: unavailable: NodeGroupRefused on nodeclaim ` + regexp.QuoteMeta(pool.Name) + `-\S+, until (\S+)$`).FindStringSubmatch(out)
	Expect(m).NotTo(BeNil(), "the refusal and its end")
	until, err := time.Parse(time.RFC3339, m[1])
	Expect(err).NotTo(HaveOccurred())
	// The event's time is in whole seconds, and came before refusedAt.
	Expect(until).To(BeTemporally("~", refusedAt.Add(refusedAside), 10*time.Second))
	Expect(out).To(ContainSubstring("Could hold it: no NodePool and flavor now\n"))
}
