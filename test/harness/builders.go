package harness

import (
	"context"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
)

// The builders below make the objects every suite, the lifecycle tests and the bench create,
// without creating them: a Scenario creates and tracks them, a test that has no Scenario
// (one that uninstalls the CRDs its cleanup would need) creates them itself.

// AllFlavors is every flavor of the catalogue, smallest first.
var AllFlavors = []string{"2XS", "XS", "S", "M", "L", "XL"}

// NewNodeClass is a CleverNodeClass with labels for its nodes.
func NewNodeClass(name string, labels map[string]string) *v1alpha1.CleverNodeClass {
	nc := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(labels) > 0 {
		nc.Spec.Labels = map[string]v1alpha1.LabelValue{}
		for k, v := range labels {
			nc.Spec.Labels[k] = v1alpha1.LabelValue(v)
		}
	}
	return nc
}

// NewNodePool is a NodePool on class allowing flavors (all when empty), never expiring,
// consolidating empty or underutilized nodes after consolidateAfter with no budget in the
// way, edited by opts.
func NewNodePool(name, class string, flavors []string, consolidateAfter time.Duration, opts ...PoolOption) *karpv1.NodePool {
	if len(flavors) == 0 {
		flavors = AllFlavors
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: v1alpha1.Group, Kind: "CleverNodeClass", Name: class}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{
		Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: flavors,
	}}
	np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("Never")
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(consolidateAfter.String())
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	for _, o := range opts {
		o(np)
	}
	return np
}

// NewDeployment is a Deployment, in namespace, of pause pods requesting cpu and memory, held
// to the NodePool pool by node affinity, edited by opts.
func NewDeployment(namespace, name, pool string, replicas int32, cpu, memory string, opts ...WorkloadOption) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       PausePodSpec(pool, cpu, memory),
			},
		},
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// WaitNodeClassReady waits for a CleverNodeClass to be Ready.
func WaitNodeClassReady(ctx context.Context, g gomega.Gomega, c client.Client, nc *v1alpha1.CleverNodeClass) {
	g.Eventually(func(g gomega.Gomega) {
		got := &v1alpha1.CleverNodeClass{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(nc), got)).To(gomega.Succeed())
		g.Expect(got.StatusConditions().Root().IsTrue()).To(gomega.BeTrue(), "CleverNodeClass %s not Ready: %+v", nc.Name, got.Status.Conditions)
	}).WithTimeout(30 * time.Second).Should(gomega.Succeed())
}

// WaitNodePoolsReady waits for NodePools to be Ready: Karpenter logs an error for a pending
// pod while a freshly applied pool is not Ready yet.
func WaitNodePoolsReady(ctx context.Context, g gomega.Gomega, c client.Client, names ...string) {
	g.Eventually(func(g gomega.Gomega) {
		for _, n := range names {
			np := &karpv1.NodePool{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: n}, np)).To(gomega.Succeed())
			g.Expect(np.StatusConditions().Root().IsTrue()).To(gomega.BeTrue(), "NodePool %s Ready: %+v", n, np.Status.Conditions)
		}
	}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(gomega.Succeed())
}

// RunningPods lists a Deployment's pods that run, Ready, and are not being deleted.
func RunningPods(ctx context.Context, c client.Client, d *appsv1.Deployment) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && PodReady(&p) {
			out = append(out, p)
		}
	}
	return out, nil
}
