package restart

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// leaseName is Karpenter core's default leader-election lease, the one the bundle's Role
// lets the controller update.
const leaseName = "karpenter-leader-election"

func leaseHolder(s *harness.Scenario) string {
	s.T.Helper()
	l := &coordinationv1.Lease{}
	Expect(env.Client.Get(s.Ctx, client.ObjectKey{Namespace: stack.SystemNamespace, Name: leaseName}, l)).To(Succeed())
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// A rolling update sends SIGTERM: the controller exits 0 and hands its lease back, so the
// next replica leads at once instead of waiting out the lease's duration. (SIGKILL, the other
// path, is TestKilledMidLaunch: the lease then expires.)
func TestGracefulStopReleasesLease(t *testing.T) {
	s := harness.NewScenario(t, env)
	var before string
	Eventually(func() string { before = leaseHolder(s); return before }).WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
	Expect(env.Controller().Stop()).To(Succeed(), "SIGTERM → clean exit")
	Expect(leaseHolder(s)).To(BeEmpty(), "the lease is released on SIGTERM")

	started := time.Now()
	s.RestartController(nil)
	Eventually(func() string { return leaseHolder(s) }).WithTimeout(5*time.Second).WithPolling(100*time.Millisecond).
		Should(And(Not(BeEmpty()), Not(Equal(before))), "the new controller leads at once")
	t.Logf("new leader %s after the restart began", time.Since(started).Round(100*time.Millisecond))
}

// The controller is SIGKILLed while a NodeGroup waits for its verdict, and restarted: the
// claim converges on that same group, with no duplicate and no leak.
func TestKilledMidLaunch(t *testing.T) {
	s := harness.NewScenario(t, env)
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.DecisionDelay = 10 * time.Second })
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)

	w, err := env.Client.Watch(s.Ctx, &ngv1.NodeGroupList{}, client.MatchingLabels{karpv1.NodePoolLabelKey: pool.Name})
	Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]bool{}
	go func() {
		for ev := range w.ResultChan() {
			if g, ok := ev.Object.(*ngv1.NodeGroup); ok && ev.Type == watch.Added {
				mu.Lock()
				created[g.Name] = true
				mu.Unlock()
			}
		}
	}()

	d := s.Deployment("phoenix", pool.Name, 1, "1", "1Gi")
	var first ngv1.NodeGroup
	Eventually(func(g Gomega) {
		groups := s.PoolGroups(pool.Name)
		g.Expect(groups).To(HaveLen(1))
		first = groups[0]
	}).WithTimeout(harness.LaunchTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	Expect(first.Status.Phase).To(BeEmpty(), "killed before the verdict")
	Expect(env.Controller().Kill()).To(Succeed())
	s.RestartController(nil)

	s.WaitRunning(d, 1, 2*harness.LaunchTimeout)
	claims, err := env.NodeClaims(s.Ctx, pool.Name)
	Expect(err).NotTo(HaveOccurred())
	Expect(claims).To(HaveLen(1))
	Expect(claims[0].Name).To(Equal(first.Name), "the claim launched before the kill converged")
	groups := s.PoolGroups(pool.Name)
	Expect(groups).To(HaveLen(1))
	Expect(groups[0].UID).To(Equal(first.UID), "the same NodeGroup, adopted")
	mu.Lock()
	defer mu.Unlock()
	Expect(created).To(HaveLen(1), "NodeGroups ever created for the pool")
}

// An invalid flavors overrides file does not crash-loop the controller: it runs on the
// base catalogue, says so in a metric, and provisions.
func TestInvalidOverrides(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`(?i)overrides`)
	path := filepath.Join(t.TempDir(), "flavors.yaml")
	Expect(os.WriteFile(path, []byte("- name: XS\n  cpu: -6\n- name: 2XS\n  cpuu: 4\n"), 0o600)).To(Succeed())
	s.RestartController(map[string]string{"FLAVORS_CONFIG_PATH": path})
	t.Cleanup(func() { s.RestartController(nil) }) // runs before the scenario's cleanup
	Expect(s.Metric("karpenter_clevercloud_catalog_overrides_valid", nil)).To(Equal(0.0))

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)
	d := s.Deployment("base", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	Expect(harness.FlavorsOf(s.PoolGroups(pool.Name))).To(ConsistOf("2XS"))
	Expect(env.Controller().Running()).To(BeTrue())
}
