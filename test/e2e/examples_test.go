package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// applyExample applies an examples/ file as shipped (workloads into the scenario's namespace)
// and tracks its objects for cleanup.
func applyExample(s *harness.Scenario, file string) []*unstructured.Unstructured {
	s.T.Helper()
	objs, err := stack.DecodeFile(stack.ModuleRoot() + "/examples/" + file)
	Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		if o.GetNamespace() != "" {
			o.SetNamespace(s.Namespace)
		}
	}
	Expect(env.Apply(s.Ctx, objs...)).To(Succeed())
	for _, o := range objs {
		if o.GetNamespace() == "" {
			s.Track(o.DeepCopy())
		}
	}
	return objs
}

func deploymentOf(objs []*unstructured.Unstructured) *appsv1.Deployment {
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			d := &appsv1.Deployment{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d)).To(Succeed())
			return d
		}
	}
	return nil
}

// 12a. examples/general-purpose.yaml + examples/inflate.yaml: three inflate pods run on one
// 2XS carrying the class's label; scaled to zero, the node goes after consolidateAfter (30 s).
func TestExampleGeneralPurposeInflate(t *testing.T) {
	s := harness.NewScenario(t, env)
	applyExample(s, "general-purpose.yaml")
	d := deploymentOf(applyExample(s, "inflate.yaml"))
	Expect(d).NotTo(BeNil())
	s.Scale(d, 3)
	s.WaitRunning(d, 3, harness.LaunchTimeout)
	Expect(flavors(s.PoolGroups("default"))).To(ConsistOf("2XS"))
	nodes, err := env.PoolNodes(s.Ctx, "default")
	Expect(err).NotTo(HaveOccurred())
	Expect(nodes).To(HaveLen(1))
	Expect(nodes[0].Labels).To(HaveKeyWithValue("team", "platform"))

	s.Scale(d, 0)
	Eventually(func(g Gomega) {
		g.Expect(s.PoolGroups("default")).To(BeEmpty())
	}).WithTimeout(disruptTimeout).WithPolling(time.Second).Should(Succeed())
}

// 12b. examples/team-pool.yaml + examples/team-workload.yaml: the team's pod, which tolerates
// the team taint and selects the team label, lands on an S (the pool allows S and M) that
// carries both.
func TestExampleTeamPool(t *testing.T) {
	s := harness.NewScenario(t, env)
	applyExample(s, "team-pool.yaml")
	d := deploymentOf(applyExample(s, "team-workload.yaml"))
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	groups := s.PoolGroups("team-data")
	Expect(flavors(groups)).To(ConsistOf("S"))
	Expect(groups[0].Spec.Labels).To(HaveKeyWithValue("example.com/team", "data"))
	nodes, err := env.PoolNodes(s.Ctx, "team-data")
	Expect(err).NotTo(HaveOccurred())
	Expect(nodes).To(HaveLen(1))
	Expect(nodes[0].Labels).To(HaveKeyWithValue("example.com/team", "data"))
	Expect(nodes[0].Spec.Taints).To(ContainElement(corev1.Taint{Key: "example.com/team", Value: "data", Effect: corev1.TaintEffectNoSchedule}))
}
