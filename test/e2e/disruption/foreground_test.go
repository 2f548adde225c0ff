package disruption

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// A NodeClaim deleted with foreground propagation (what `kubectl delete --cascade=foreground`
// and Karpenter core's own e2e suites do) is drained before its VM goes. Had the NodeGroup an
// owner reference to the claim, Kubernetes' garbage collector would delete the group first,
// the platform would tear the VM down and the pods would die undrained. A PodDisruptionBudget
// that allows no eviction holds the drain, so the group must stay for as long as it holds.
func TestForegroundDeletionDrainsFirst(t *testing.T) {
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Hour)
	d := s.Deployment("guarded", pool.Name, 1, "1", "1Gi")
	pods := s.WaitRunning(d, 1, harness.LaunchTimeout)
	node := pods[0].Spec.NodeName
	claims, err := env.NodeClaims(s.Ctx, pool.Name)
	Expect(err).NotTo(HaveOccurred())
	Expect(claims).To(HaveLen(1))
	claim := claims[0]
	group := claim.Name
	Expect(node).To(Equal(ngv1.NodeName(group, 0)))

	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: d.Namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &intstr.IntOrString{Type: intstr.Int, IntVal: 0},
			Selector:       d.Spec.Selector,
		},
	}
	Expect(env.Client.Create(s.Ctx, pdb)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(env.Client.Delete(s.Ctx, pdb)) })

	Expect(env.Client.Delete(s.Ctx, &claim, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
	// Karpenter starts terminating the node: it is tainted for the drain.
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
		g.Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", karpv1.DisruptedTaintKey)))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	// While the budget blocks the eviction, the group and its pod stay.
	Consistently(func(g Gomega) {
		got := &ngv1.NodeGroup{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: group}, got)).To(Succeed())
		g.Expect(got.DeletionTimestamp).To(BeNil(), "the NodeGroup is deleted before the drain finished")
		p := &corev1.Pod{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(&pods[0]), p)).To(Succeed())
		g.Expect(p.DeletionTimestamp).To(BeNil(), "the guarded pod is being deleted")
		g.Expect(p.Spec.NodeName).To(Equal(node))
	}).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(Succeed())

	// The budget lifted, the drain completes, then the group, its node and the claim go, and
	// the pod runs on a replacement.
	Expect(env.Client.Delete(s.Ctx, pdb)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: group}, &ngv1.NodeGroup{})).NotTo(Succeed(), "the NodeGroup is gone")
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: node}, &corev1.Node{})).NotTo(Succeed(), "its node is gone")
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(&claim), &karpv1.NodeClaim{})).NotTo(Succeed(), "the claim is gone")
	}).WithTimeout(harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	pods = s.WaitRunning(d, 1, harness.LaunchTimeout)
	Expect(pods[0].Spec.NodeName).NotTo(Equal(node))
}
