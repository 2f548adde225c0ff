package provisioning

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// The placement examples, applied as shipped on one cluster (the default pool's limits
// raised so that its workloads fit together; each workload targets its own pool, so their
// outcomes are independent):
//   - weighted-pools.yaml + inflate.yaml (first, alone): inflate lands on weighted-high's S;
//   - prefer-small.yaml: three 1 vCPU / 1500Mi pods on two 2XS, not one XS;
//   - flavor-pinned.yaml: an M;
//   - one-pod-per-node.yaml: three replicas on three distinct nodes;
//   - large-instances.yaml: a 1 vCPU pod gets an L;
//   - small-flavors.yaml: a pod needing 10Gi gets an S; one needing 9 vCPU (an M) stays Pending;
//   - min-values.yaml: claims list ≥ 3 flavors with minValues 3, the node is a 2XS; a 9 vCPU
//     pod (only M holds it) stays Pending;
//   - cpu-limit.yaml: three 3 vCPU pods → two 2XS (8 vCPU), the third Pending, limit reported;
//   - max-node-lifetime.yaml: its claim carries expireAfter 168h (expiry itself: TestExpireAfter).
func TestExamplesPlacement(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Karpenter core logs pods it cannot place at error level: the Pending probes below.
	s.AllowErrors(`could not schedule pod`)
	s.RaiseQuota()
	s.ApplyExample("general-purpose.yaml")
	// The workloads below share the default pool: general-purpose.yaml caps it at 16 vCPU /
	// 16Gi (the default quota's headroom), less than they need together.
	harness.Update(s, &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("128Gi")}
	})

	// inflate may use any pool and any node with room: alone first, so that weights decide.
	s.ApplyExample("weighted-pools.yaml")
	s.WaitPoolsReady("default", "weighted-high", "weighted-low")
	inflate := s.DeploymentIn(s.ApplyExample("inflate.yaml"))
	s.Scale(inflate, 1)
	inflateNode := s.NodeOf(s.WaitRunning(inflate, 1, harness.LaunchTimeout)[0])
	Expect(harness.FlavorOfNode(inflateNode)).To(Equal("S"), "weighted-pools: weighted-high's S")
	Expect(inflateNode.Labels).To(HaveKeyWithValue(karpv1.NodePoolLabelKey, "weighted-high"))

	// Then alone, so that no other workload's nodes can take its pods.
	small := s.DeploymentIn(s.ApplyExample("prefer-small.yaml"))
	pods := s.WaitRunning(small, 3, harness.LaunchTimeout)
	hosts := map[string]bool{}
	for _, p := range pods {
		Expect(harness.FlavorOfNode(s.NodeOf(p))).To(Equal("2XS"), "prefer-small pod %s", p.Name)
		hosts[p.Spec.NodeName] = true
	}
	Expect(hosts).To(HaveLen(2), "prefer-small: two 2XS")

	pinned := s.DeploymentIn(s.ApplyExample("flavor-pinned.yaml"))
	spread := s.DeploymentIn(s.ApplyExample("one-pod-per-node.yaml"))
	for _, f := range []string{"large-instances.yaml", "small-flavors.yaml", "min-values.yaml", "cpu-limit.yaml", "max-node-lifetime.yaml"} {
		s.ApplyExample(f)
	}
	s.WaitPoolsReady("large", "small", "flexible", "capped", "short-lived")
	large := s.Deployment("large-probe", "large", 1, "1", "1Gi")
	smallFit := s.Deployment("small-fit", "small", 1, "1", "10Gi")
	smallTooBig := s.Deployment("small-too-big", "small", 1, "9", "1Gi")
	flexible := s.Deployment("flexible-probe", "flexible", 1, "1", "1Gi")
	flexibleTooBig := s.Deployment("flexible-too-big", "flexible", 1, "9", "1Gi")
	capped := s.Deployment("capped-probe", "capped", 3, "3", "1Gi")
	lifetime := s.Deployment("lifetime-probe", "short-lived", 1, "1", "1Gi")

	Expect(harness.FlavorOfNode(s.NodeOf(s.WaitRunning(pinned, 1, harness.LaunchTimeout)[0]))).To(Equal("M"), "flavor-pinned")
	hosts = map[string]bool{}
	for _, p := range s.WaitRunning(spread, 3, harness.LaunchTimeout) {
		hosts[p.Spec.NodeName] = true
	}
	Expect(hosts).To(HaveLen(3), "one-pod-per-node: three distinct nodes")
	Expect(harness.FlavorOfNode(s.NodeOf(s.WaitRunning(large, 1, harness.LaunchTimeout)[0]))).To(Equal("L"), "large-instances")
	Expect(harness.FlavorOfNode(s.NodeOf(s.WaitRunning(smallFit, 1, harness.LaunchTimeout)[0]))).To(Equal("S"), "small-flavors, 10Gi")
	Expect(harness.FlavorOfNode(s.NodeOf(s.WaitRunning(flexible, 1, harness.LaunchTimeout)[0]))).To(Equal("2XS"), "min-values")
	s.WaitRunning(lifetime, 1, harness.LaunchTimeout)
	Eventually(func() int { n, _ := s.RunningPods(capped); return n }).WithTimeout(harness.LaunchTimeout).Should(Equal(2), "cpu-limit: two 3 vCPU pods run")

	for _, c := range s.PoolClaims("flexible") {
		var req *karpv1.NodeSelectorRequirementWithMinValues
		for i := range c.Spec.Requirements {
			if c.Spec.Requirements[i].Key == corev1.LabelInstanceTypeStable {
				req = &c.Spec.Requirements[i]
			}
		}
		Expect(req).NotTo(BeNil(), "claim %s has an instance-type requirement", c.Name)
		Expect(req.MinValues).To(HaveValue(Equal(3)), "claim %s", c.Name)
		Expect(len(req.Values)).To(BeNumerically(">=", 3), "claim %s flavors %v", c.Name, req.Values)
	}
	for _, c := range s.PoolClaims("short-lived") {
		Expect(c.Spec.ExpireAfter.Duration).To(HaveValue(Equal(168 * time.Hour)))
	}

	// What must not get a node stays Pending for the whole window.
	Consistently(func(g Gomega) {
		g.Expect(unscheduled(s, smallTooBig)).To(Equal(1), "small-flavors: 9 vCPU pod")
		g.Expect(unscheduled(s, flexibleTooBig)).To(Equal(1), "min-values: 9 vCPU pod")
		g.Expect(unscheduled(s, capped)).To(Equal(1), "cpu-limit: third pod")
		g.Expect(s.PoolClaims("capped")).To(HaveLen(2), "cpu-limit: two nodes")
		g.Expect(s.PoolClaims("small")).To(HaveLen(1))
		g.Expect(s.PoolClaims("flexible")).To(HaveLen(1))
	}).WithTimeout(pendingWindow).WithPolling(time.Second).Should(Succeed())
	Expect(karpenterPodMessages(s, capped)).To(ContainElement(ContainSubstring("exceed limits for nodepool")), "cpu-limit reported")
	Expect(karpenterPodMessages(s, flexibleTooBig)).To(ContainElement(ContainSubstring("minValues")), "min-values reported")
	for _, c := range s.PoolClaims("capped") {
		Expect(c.Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "2XS"))
	}
}

// pendingWindow is how long pods that must not get a node are watched staying Pending.
const pendingWindow = 20 * time.Second

// unscheduled counts a Deployment's pods that have no node.
func unscheduled(s *harness.Scenario, d *appsv1.Deployment) int {
	n := 0
	for _, p := range s.Pods(d) {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// karpenterPodMessages are the messages of Karpenter's FailedScheduling events on d's pods.
func karpenterPodMessages(s *harness.Scenario, d *appsv1.Deployment) []string {
	var out []string
	pods := map[string]bool{}
	for _, p := range s.Pods(d) {
		pods[p.Name] = true
	}
	for _, ev := range s.EventsSince("FailedScheduling", "") {
		if ev.InvolvedObject.Namespace == d.Namespace && pods[ev.InvolvedObject.Name] {
			out = append(out, ev.Message)
		}
	}
	return out
}
