package ownership

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/garbagecollection"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// A NodeGroup that only looks managed (our labels, no claim UID: a hand-copied manifest)
// is refused, loudly, and survives.
func TestGarbageCollectionRefusesLookalike(t *testing.T) {
	s := harness.NewScenario(t, env)
	g := &ngv1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-lookalike", Labels: map[string]string{
			v1alpha1.LabelNodeClaim: "hand-copied", v1alpha1.LabelNodeClass: "default",
		}},
		Spec: ngv1.NodeGroupSpec{Flavor: "2XS", NodeCount: 1},
	}
	s.Create(g)
	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(garbagecollection.ReasonRefused, "e2e-lookalike")).NotTo(BeEmpty())
		g.Expect(s.Metric("karpenter_clevercloud_nodegroup_garbage_collection_refused", map[string]string{"reason": "NoOwnerClaim"})).To(BeNumerically(">=", 1))
	}).WithTimeout(harness.GarbageCollectionTimeout).WithPolling(time.Second).Should(Succeed())
	got := &ngv1.NodeGroup{}
	Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(g), got)).To(Succeed())
	Expect(got.DeletionTimestamp).To(BeNil(), "the lookalike survives")
	Expect(s.EventsSince(garbagecollection.ReasonReaped, "e2e-lookalike")).To(BeEmpty())
	// Its node joined and is left alone too.
	Eventually(func() error {
		return env.Client.Get(s.Ctx, client.ObjectKey{Name: ngv1.NodeName(g.Name, 0)}, &corev1.Node{})
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// A managed group whose owner NodeClaim is gone is reaped, with its node, by the
// provider's garbage collector: nothing else can, since the group names its claim by UID and
// not with an owner reference the kube-controller-manager would act on.
func TestGarbageCollectionReapsOrphan(t *testing.T) {
	s := harness.NewScenario(t, env)
	g := &ngv1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-orphan", Labels: map[string]string{
			v1alpha1.LabelNodeClaim: "e2e-orphan", v1alpha1.LabelNodeClass: "default",
		}, Annotations: map[string]string{
			v1alpha1.AnnotationNodeClaimUID: "00000000-0000-0000-0000-00000000dead",
		}},
		Spec: ngv1.NodeGroupSpec{Flavor: "2XS", NodeCount: 1},
	}
	s.Create(g)
	Eventually(func(g Gomega) {
		err := env.Client.Get(s.Ctx, client.ObjectKey{Name: "e2e-orphan"}, &ngv1.NodeGroup{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "orphan still there (%v)", err)
		err = env.Client.Get(s.Ctx, client.ObjectKey{Name: ngv1.NodeName("e2e-orphan", 0)}, &corev1.Node{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "orphan's node still there (%v)", err)
	}).WithTimeout(harness.GarbageCollectionTimeout).WithPolling(time.Second).Should(Succeed())
	Expect(s.EventsSince(garbagecollection.ReasonReaped, "e2e-orphan")).NotTo(BeEmpty(), "reaped by the provider's garbage collector")
}

// A launched group that vanishes upstream before its node registers is fast-failed: the
// claim is deleted (event, metric) and Karpenter relaunches, long before the 15-minute
// registration timeout.
func TestVanishedGroupFastFails(t *testing.T) {
	s := harness.NewScenario(t, env)
	env.Cluster.Operator().Configure(func(o *operator.Options) {
		o.Faults = []operator.Fault{operator.FaultVanishAfterAccept}
		o.VanishDelay = 500 * time.Millisecond
		o.JoinDelay = 5 * time.Second
	})
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)
	d := s.Deployment("ghost", pool.Name, 1, "1", "1Gi")
	start := time.Now()
	Eventually(func(g Gomega) {
		g.Expect(s.EventsSince(cloudprovider.ReasonVanished, "")).NotTo(BeEmpty())
	}).WithTimeout(harness.GarbageCollectionTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	env.Cluster.Operator().Configure(func(o *operator.Options) { o.Faults = nil })
	t.Logf("vanished group fast-failed %s after the pod was created", time.Since(start).Round(time.Second))
	Expect(s.Metric("karpenter_clevercloud_nodegroup_vanished_total", map[string]string{"stage": "registration"})).To(BeNumerically(">=", 1))
	s.WaitRunning(d, 1, harness.GarbageCollectionTimeout)
	// Core marks the claim Registered and Initialized shortly after the node lets the pod in:
	// wait for it rather than race it.
	claims := s.WaitInitializedClaims(pool.Name, 1)
	Expect(claims[0].StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue()).To(BeTrue())
}
