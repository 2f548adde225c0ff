package harness

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// ApplyExample applies an examples/ file as shipped (its namespaced objects into the
// scenario's namespace) and tracks its cluster-scoped objects for cleanup.
func (s *Scenario) ApplyExample(file string) []*unstructured.Unstructured {
	s.T.Helper()
	objs, err := stack.DecodeFile(stack.ModuleRoot() + "/examples/" + file)
	s.must(err)
	for _, o := range objs {
		if o.GetNamespace() != "" {
			o.SetNamespace(s.Namespace)
		}
	}
	s.must(s.Env.Apply(s.Ctx, objs...))
	for _, o := range objs {
		if o.GetNamespace() == "" {
			s.Track(o.DeepCopy())
		}
	}
	return objs
}

// DeploymentIn returns the first Deployment among objs, failing the test when there is none.
func (s *Scenario) DeploymentIn(objs []*unstructured.Unstructured) *appsv1.Deployment {
	s.T.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			d := &appsv1.Deployment{}
			s.must(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d))
			return d
		}
	}
	s.T.Fatal("no Deployment among the example's objects")
	return nil
}

// WaitPoolsReady waits for the scenario's NodePools to be Ready (WaitNodePoolsReady).
func (s *Scenario) WaitPoolsReady(names ...string) {
	s.T.Helper()
	WaitNodePoolsReady(s.Ctx, s.G, s.Env.Client, names...)
}
