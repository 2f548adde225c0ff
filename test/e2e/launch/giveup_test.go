package launch

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/launch"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// A launch that looks dead — accepted, then the operator stops working on it with a reason
// nobody knows, no node ever — is given up long before core's 15-minute registration timeout:
// its NodeClaim is deleted (event, metric), and the replacement runs the pod. The give-up
// time is compressed here; its default and the reasoning behind it are the launch package's.
func TestADeadLaunchIsGivenUpAndReplaced(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.RestartController(map[string]string{"NODEGROUP_STOPPED_LAUNCH_GIVE_UP_AFTER": "20s", "NODEGROUP_LAUNCH_GIVE_UP_AFTER": "40s"})
	t.Cleanup(func() { s.RestartController(nil) })
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.Faults = []operator.Fault{operator.FaultDeadLaunch} })
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)
	start := time.Now()
	d := s.Deployment("dead-launch", pool.Name, 1, "1", "1Gi")

	// The first launch dies: its group shows the operator stopped, with no node.
	var dead ngv1.NodeGroup
	Eventually(func(g Gomega) {
		groups := s.PoolGroups(pool.Name)
		g.Expect(groups).NotTo(BeEmpty())
		dead = groups[0]
		p := dead.Condition(ngv1.ConditionReconcileInProgress)
		g.Expect(p).NotTo(BeNil())
		g.Expect(p.Status).To(Equal(metav1.ConditionFalse))
	}).WithTimeout(harness.LaunchTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	// Its replacement must work: the platform recovers.
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.Faults = nil })

	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(launch.ReasonLaunchGivenUp, dead.Name)).NotTo(BeEmpty(), "given-up event on the claim")
		err := env.Client.Get(s.Ctx, client.ObjectKey{Name: dead.Name}, &karpv1.NodeClaim{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the dead launch's NodeClaim is still there")
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	givenUp := time.Since(start)
	Expect(s.Metric("karpenter_clevercloud_nodegroup_launches_given_up_total", nil)).To(BeNumerically(">=", 1))
	s.WaitRunning(d, 1, 2*harness.LaunchTimeout)
	t.Logf("dead launch given up %s after the pod was created, the pod Running %s after", givenUp.Round(time.Second), time.Since(start).Round(time.Second))
	Expect(time.Since(start)).To(BeNumerically("<", 5*time.Minute), "far from core's 15-minute registration timeout")
	Eventually(func() []string {
		var names []string
		for _, g := range s.PoolGroups(pool.Name) {
			names = append(names, g.Name)
		}
		return names
	}).WithTimeout(time.Minute).WithPolling(time.Second).ShouldNot(ContainElement(dead.Name), "the dead group is deleted")
}

// A refusal the provider cannot classify (an unknown ReconcileFailed reason as the first status
// write, never Creating) fails the launch, deletes the group and sets that flavor aside: the
// pod lands on the pool's other flavor, and the refused one stays aside when a node is deleted.
func TestAnUnclassifiedRefusalSetsTheFlavorAside(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Core logs the failed launch, and the pod it cannot place while 2XS is set aside.
	s.AllowErrors(`failed launching nodeclaim.*refused`, `could not schedule pod`)
	s.RestartController(nil) // no memory of the flavor from an earlier scenario
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.Faults = []operator.Fault{operator.FaultUnknownRefusal} })
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS"}, time.Minute)
	d := s.Deployment("unclassified", pool.Name, 1, "1", "1Gi")

	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(cloudprovider.ReasonRefused, "")).NotTo(BeEmpty())
		g.Expect(s.PoolFlavors(pool.Name)).To(BeEmpty(), "the refused group is deleted")
	}).WithTimeout(harness.LaunchTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	refusedOnce := s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"flavor": "2XS", "outcome": "Refused"})
	Expect(refusedOnce).To(BeNumerically(">=", 1))
	// The platform works again; the pool now allows XS too: the pod lands there, since the
	// refused 2XS is set aside.
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.Faults = nil })
	harness.Update(s, pool, func(np *karpv1.NodePool) { np.Spec.Template.Spec.Requirements[0].Values = []string{"2XS", "XS"} })
	s.WaitRunning(d, 1, 2*harness.LaunchTimeout)
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("XS"), "the refused 2XS was set aside")

	// A node deletion frees capacity, which says nothing about why the platform refused the
	// flavor: the replacement stays off 2XS.
	s.Scale(d, 0)
	Eventually(func() []ngv1.NodeGroup { return s.PoolGroups(pool.Name) }).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(BeEmpty())
	s.Scale(d, 1)
	s.WaitRunning(d, 1, 2*harness.LaunchTimeout)
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("XS"))
	Expect(s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"flavor": "2XS", "outcome": "Refused"})).To(Equal(refusedOnce), "2XS not tried again")
}
