package install

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// The in-place switch from the upstream provider (v0.11/v0.12). The cluster
// state upstream leaves behind is written by the test while this controller is stopped — a
// NodeClaim, its NodeGroup in upstream's shape (upstream's labels and hash stamp, an owner
// reference to the claim, karpenter.sh/nodepool in spec.labels) and the node the platform
// makes of it. Started, the controller adopts it without creating or deleting any NodeGroup,
// stamps the node's provider ID so the claim registers, leaves it undrifted; and a later
// CleverNodeClass change rolls it like a node of its own.
func TestSwitchFromUpstream(t *testing.T) {
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", map[string]string{"example.com/rev": "one"})
	pool := s.NodePool("", class, []string{"XS"}, time.Hour)
	// Karpenter stamps the pool's hash on it; upstream's claims carry the same annotations.
	Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Annotations).To(HaveKey(karpv1.NodePoolHashAnnotationKey))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	Expect(env.Controller().Stop()).To(Succeed())
	claim := upstreamClaim(s, pool, class, "XS")
	group := &ngv1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name: claim.Name,
			Labels: map[string]string{
				v1alpha1.UpstreamLabelManaged:  "true",
				v1alpha1.LabelNodeClaim:        claim.Name,
				v1alpha1.UpstreamLabelNodePool: pool.Name,
				v1alpha1.LabelNodeClass:        class.Name,
			},
			// v0.11 wrote no hash version: its generation v1, over the labels as they are.
			Annotations:     map[string]string{v1alpha1.UpstreamAnnotationNodeClassHash: class.Hash()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: claim.Name, UID: claim.UID}},
		},
		Spec: ngv1.NodeGroupSpec{
			Flavor: "XS", NodeCount: 1,
			Labels: map[string]string{karpv1.NodePoolLabelKey: pool.Name, "example.com/rev": "one"},
			Taints: []ngv1.Taint{{Key: karpv1.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}},
		},
	}
	Expect(env.Client.Create(s.Ctx, group)).To(Succeed())
	node := ngv1.NodeName(group.Name, 0)
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
		g.Expect(n.Spec.ProviderID).To(BeEmpty(), "CKE leaves it empty; upstream's stamper is gone with upstream")
	}).WithTimeout(harness.LaunchTimeout).Should(Succeed())

	// Every NodeGroup created or deleted from the switch-over on: the watch starts at the
	// current version, so the groups that exist now are not reported as added.
	existing := &ngv1.NodeGroupList{}
	Expect(env.Client.List(s.Ctx, existing)).To(Succeed())
	w, err := env.Client.Watch(s.Ctx, &ngv1.NodeGroupList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: existing.ResourceVersion}})
	Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var mu sync.Mutex
	var churn []string
	go func() {
		for ev := range w.ResultChan() {
			g, ok := ev.Object.(*ngv1.NodeGroup)
			if ok && (ev.Type == watch.Added || ev.Type == watch.Deleted) {
				mu.Lock()
				churn = append(churn, string(ev.Type)+" "+g.Name)
				mu.Unlock()
			}
		}
	}()
	churned := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), churn...) }

	s.RestartController(nil)
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
		g.Expect(n.Spec.ProviderID).To(Equal("clevercloud://"+group.Name), "the stamper accepts the adopted group")
		got := &karpv1.NodeClaim{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(claim), got)).To(Succeed())
		g.Expect(got.Status.ProviderID).To(Equal("clevercloud://" + group.Name))
		g.Expect(got.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue()).To(BeTrue(), "registered")
		g.Expect(got.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue()).To(BeTrue(), "initialized")
	}).WithTimeout(harness.LaunchTimeout).WithPolling(time.Second).Should(Succeed())

	// A workload lands on the adopted node (no launch for it), and nothing moves: no group
	// created or deleted, the claim not drifted by the different hash scheme.
	d := s.Deployment("adopted", pool.Name, 1, "500m", "512Mi")
	pods := s.WaitRunning(d, 1, harness.LaunchTimeout)
	Expect(pods[0].Spec.NodeName).To(Equal(node))
	Consistently(func(g Gomega) {
		got := &karpv1.NodeClaim{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(claim), got)).To(Succeed())
		g.Expect(got.StatusConditions().Get(karpv1.ConditionTypeDrifted)).To(BeNil(), "not drifted at switch-over")
		g.Expect(churned()).To(BeEmpty(), "NodeGroups created or deleted at switch-over")
	}).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(Succeed())
	Expect(s.EventsSince("NodeGroupLegacyLabels", claim.Name)).NotTo(BeEmpty(), "the legacy spec.labels are reported")
	// Upstream's owner reference is moved to the claim UID annotation, so that deleting the
	// claim with foreground propagation no longer takes the VM down before the drain.
	Eventually(func(g Gomega) {
		got := &ngv1.NodeGroup{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(group), got)).To(Succeed())
		g.Expect(got.OwnerReferences).To(BeEmpty())
		g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClaimUID, string(claim.UID)))
	}).WithTimeout(harness.GarbageCollectionTimeout).WithPolling(time.Second).Should(Succeed())

	// A class change rolls the adopted node.
	harness.Update(s, class.DeepCopy(), func(c *v1alpha1.CleverNodeClass) { c.Spec.Labels["example.com/rev"] = "two" })
	Eventually(func(g Gomega) {
		got := &karpv1.NodeClaim{}
		err := env.Client.Get(s.Ctx, client.ObjectKeyFromObject(claim), got)
		if err == nil {
			g.Expect(got.StatusConditions().Get(karpv1.ConditionTypeDrifted).IsTrue() || got.DeletionTimestamp != nil).To(BeTrue(), "claim Drifted")
		}
	}).WithTimeout(time.Minute).Should(Succeed())
	var fresh ngv1.NodeGroup
	Eventually(func(g Gomega) {
		groups := s.PoolGroups(pool.Name) // ours carry karpenter.sh/nodepool as an object label
		g.Expect(groups).To(HaveLen(1))
		fresh = groups[0]
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(group), &ngv1.NodeGroup{})).NotTo(Succeed(), "the adopted group is deleted")
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: node}, &corev1.Node{})).NotTo(Succeed(), "its node is gone")
	}).WithTimeout(harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	Expect(fresh.Spec.Labels).To(HaveKeyWithValue("example.com/rev", "two"))
	Expect(fresh.Spec.Labels).NotTo(HaveKey(karpv1.NodePoolLabelKey), "the replacement is built clean")
	pods = s.WaitRunning(d, 1, time.Minute)
	Expect(pods[0].Spec.NodeName).To(Equal(ngv1.NodeName(fresh.Name, 0)))
}

// upstreamClaim writes the NodeClaim Karpenter core made for a pool under upstream: launched,
// with the provider ID upstream reported, not yet registered (this controller registers it).
func upstreamClaim(s *harness.Scenario, pool *karpv1.NodePool, class *v1alpha1.CleverNodeClass, flavor string) *karpv1.NodeClaim {
	s.T.Helper()
	claim := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: pool.Name + "-up7qx",
			Labels: map[string]string{
				karpv1.NodePoolLabelKey:        pool.Name,
				corev1.LabelInstanceTypeStable: flavor,
				karpv1.CapacityTypeLabelKey:    karpv1.CapacityTypeOnDemand,
				corev1.LabelArchStable:         "amd64",
				corev1.LabelOSStable:           "linux",
				"example.com/rev":              "one",
			},
			Annotations: map[string]string{
				karpv1.NodePoolHashAnnotationKey:        pool.Annotations[karpv1.NodePoolHashAnnotationKey],
				karpv1.NodePoolHashVersionAnnotationKey: pool.Annotations[karpv1.NodePoolHashVersionAnnotationKey],
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: pool.Name, UID: pool.UID,
				BlockOwnerDeletion: ptrTo(true),
			}},
		},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: v1alpha1.Group, Kind: "CleverNodeClass", Name: class.Name},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{flavor}},
				{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{pool.Name}},
			},
			Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourcePods: resource.MustParse("1"),
			}},
			ExpireAfter: karpv1.MustParseNillableDuration("Never"),
		},
	}
	s.Create(claim)
	claim.Status.ProviderID = "clevercloud://" + claim.Name
	claim.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	Expect(env.Client.Status().Update(s.Ctx, claim)).To(Succeed())
	return claim
}

func ptrTo[T any](v T) *T { return &v }
