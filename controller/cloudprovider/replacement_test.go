package cloudprovider_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	provider "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// consolidatingPool creates a NodePool on the class that consolidates when underutilized.
func (f *fixture) consolidatingPool(t *testing.T, g Gomega) *karpv1.NodePool {
	ctx := context.Background()
	pool := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("shaped-%d", seq.Add(1))},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: v1alpha1.Group, Kind: "CleverNodeClass", Name: f.class.Name},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{
					Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand},
				}},
			}},
			Disruption: karpv1.Disruption{ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: karpv1.MustParseNillableDuration("30s")},
		},
	}
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, pool) })
	return pool
}

// launchedOn makes the pool's claim of a launched node of the flavor, consolidatable, with
// n pods of cpu / memory and a daemon set's pod on it.
func (f *fixture) launchedOn(t *testing.T, g Gomega, pool *karpv1.NodePool, flavor string, n int, cpu, memory string) *karpv1.NodeClaim {
	ctx := context.Background()
	nc := f.newClaim(g, "1", "1Gi")
	group := nodegroup.Build(nc, f.class, flavor)
	g.Expect(env.Client.Create(ctx, group)).To(Succeed())
	nc.Labels[karpv1.NodePoolLabelKey] = pool.Name
	nc.Status.ProviderID = nodegroup.ProviderID(group.Name)
	nc.Status.NodeName = nc.Name + "-node"
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeConsolidatable)
	bound := func(name, cpu, memory string, owner *metav1.OwnerReference) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: nc.Status.NodeName, Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
			}}}},
		}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		g.Expect(env.Client.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(ctx, p, &client.DeleteOptions{GracePeriodSeconds: new(int64)}) })
		p.Status.Phase = corev1.PodRunning
		g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
	}
	for i := range n {
		bound(fmt.Sprintf("%s-%d", nc.Name, i), cpu, memory, nil)
	}
	bound(nc.Name+"-daemon", "100m", "224Mi", &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "agent-uid", Controller: new(true)})
	return nc
}

func drift(g Gomega, f *fixture, nc *karpv1.NodeClaim) string {
	reason, err := f.provider.IsDrifted(context.Background(), nc)
	g.Expect(err).NotTo(HaveOccurred())
	return string(reason)
}

// An XL that fifteen CPU-heavy pods filled (1 vCPU / 512Mi: 0.5 GB per vCPU) would cost less
// than 0.9 of its price on 2XS, which Karpenter's consolidation never proposes (it replaces a
// node with one node): it is drift, reason IllShaped, once everything a user set to keep
// nodes in place allows it, and never before.
func TestAnIllShapedNodeIsDriftOnlyWhenEverythingAllowsIt(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	f.quota.Record(quota.Observation{})
	f.provider.SetCostReplacement(true, time.Hour)
	pool := f.consolidatingPool(t, g)
	xl := f.launchedOn(t, g, pool, "XL", 15, "1", "512Mi")
	full := f.launchedOn(t, g, pool, "XL", 9, "1", "3Gi")

	g.Expect(drift(g, f, xl)).To(BeEmpty(), "younger than the replacement's minimum age")
	f.clock.Step(time.Hour + time.Minute)
	g.Expect(drift(g, f, xl)).To(Equal(string(provider.DriftReasonIllShaped)))
	g.Expect(drainEvents(f.events)).To(ContainElement(ContainSubstring(provider.ReasonIllShaped)), "the user is told why")
	g.Expect(drift(g, f, full)).To(BeEmpty(), "memory-heavy pods: the XL is their shape")

	t.Run("not consolidatable yet", func(t *testing.T) {
		nc := xl.DeepCopy()
		nc.StatusConditions().SetFalse(karpv1.ConditionTypeConsolidatable, "PodsChanged", "pods changed")
		g.Expect(drift(g, f, nc)).To(BeEmpty())
	})
	t.Run("the node may not be disrupted", func(t *testing.T) {
		nc := xl.DeepCopy()
		nc.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		g.Expect(drift(g, f, nc)).To(BeEmpty())
	})
	t.Run("cost steering or the replacement off", func(t *testing.T) {
		f.provider.SetCostSteering(false)
		g.Expect(drift(g, f, xl)).To(BeEmpty(), "cost steering off")
		f.provider.SetCostSteering(true)
		f.provider.SetCostReplacement(false, time.Hour)
		g.Expect(drift(g, f, xl)).To(BeEmpty(), "replacement off")
		f.provider.SetCostReplacement(true, time.Hour)
	})
	t.Run("a pool that consolidates only when empty", func(t *testing.T) {
		ctx := context.Background()
		patch := client.MergeFrom(pool.DeepCopy())
		pool.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		g.Expect(env.Client.Patch(ctx, pool, patch)).To(Succeed())
		g.Expect(drift(g, f, xl)).To(BeEmpty())
		patch = client.MergeFrom(pool.DeepCopy())
		pool.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		g.Expect(env.Client.Patch(ctx, pool, patch)).To(Succeed())
	})
	t.Run("a pod that may not be disrupted", func(t *testing.T) {
		ctx := context.Background()
		p := &corev1.Pod{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: xl.Name + "-0"}, p)).To(Succeed())
		patch := client.MergeFrom(p.DeepCopy())
		p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		g.Expect(env.Client.Patch(ctx, p, patch)).To(Succeed())
		g.Expect(drift(g, f, xl)).To(BeEmpty())
		patch = client.MergeFrom(p.DeepCopy())
		delete(p.Annotations, karpv1.DoNotDisruptAnnotationKey)
		g.Expect(env.Client.Patch(ctx, p, patch)).To(Succeed())
	})
	t.Run("a pod placed by other pods: the model cannot price the split", func(t *testing.T) {
		ctx := context.Background()
		p := &corev1.Pod{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: xl.Name + "-1"}, p)).To(Succeed())
		// Pods' scheduling constraints are immutable: the pod is recreated with one.
		g.Expect(env.Client.Delete(ctx, p, &client.DeleteOptions{GracePeriodSeconds: new(int64)})).To(Succeed())
		g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}) }).Should(Satisfy(apierrors.IsNotFound))
		spread := p.DeepCopy()
		spread.ResourceVersion, spread.UID = "", ""
		spread.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		}}
		g.Expect(env.Client.Create(ctx, spread)).To(Succeed())
		g.Expect(drift(g, f, xl)).To(BeEmpty())
		g.Expect(env.Client.Delete(ctx, spread, &client.DeleteOptions{GracePeriodSeconds: new(int64)})).To(Succeed())
		g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}) }).Should(Satisfy(apierrors.IsNotFound))
		g.Expect(drift(g, f, xl)).To(Equal(string(provider.DriftReasonIllShaped)), "fourteen CPU-heavy pods")
	})
	t.Run("the replacement does not fit the quota's headroom", func(t *testing.T) {
		// The five 2XS take 20 vCPU beside the XL's 16 until it goes.
		f.quota.Learn("CPU", 40)
		f.quota.Learn("RAM", 100)
		f.quota.Record(quota.Observation{Usage: quota.Usage{CPU: 32, GB: 64}, Proven: quota.Usage{CPU: 32, GB: 64}})
		g.Expect(drift(g, f, xl)).To(BeEmpty())
	})
	g.Expect(drift(g, f, xl)).To(BeEmpty(), "the quota still binds")
}

// While an ill-shaped node waits for its replacement, its pods are planned for with the
// pending ones: the replacement's scheduling simulation asks for the pool's flavors, and is
// offered the 2XS their shape wants, not the XL core would fill again.
func TestTheSteeringPlansForAnIllShapedNodesPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, g, time.Minute)
	f.quota.Record(quota.Observation{})
	pool := f.consolidatingPool(t, g)
	xl := f.launchedOn(t, g, pool, "XL", 15, "1", "512Mi")
	g.Expect(env.Client.Status().Update(ctx, xl)).To(Succeed())
	all := map[string]bool{"2XS": true, "XS": true, "S": true, "M": true, "L": true, "XL": true}
	g.Expect(quotaOffered(g, f, pool)).To(Equal(all), "no pending pod, no node being replaced: nothing hidden")

	xl.StatusConditions().SetTrueWithReason(karpv1.ConditionTypeDrifted, string(provider.DriftReasonIllShaped), string(provider.DriftReasonIllShaped))
	g.Expect(env.Client.Status().Update(ctx, xl)).To(Succeed())
	f.clock.Step(provider.SteeringTTL)
	g.Expect(quotaOffered(g, f, pool)).To(Equal(map[string]bool{"2XS": true, "XS": false, "S": false, "M": false, "L": false, "XL": false}))

	// Drifted for another reason: its replacement is its own shape's business.
	xl.StatusConditions().SetTrueWithReason(karpv1.ConditionTypeDrifted, string(provider.DriftReasonNodeClass), string(provider.DriftReasonNodeClass))
	g.Expect(env.Client.Status().Update(ctx, xl)).To(Succeed())
	f.clock.Step(provider.SteeringTTL)
	g.Expect(quotaOffered(g, f, pool)).To(Equal(all))
}
