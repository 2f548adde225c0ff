package ownership

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/garbagecollection"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// reapGrace is how young a group garbage collection never reaps (garbagecollection.New): one
// just created may belong to a claim the cache has not seen yet.
const reapGrace = 30 * time.Second

// onNode binds the Deployment's pods to a node that no NodePool manages (no scheduling, so
// Karpenter never sees them pending), tolerating the startup taint the provider gives every
// group it builds, which a copied group's node keeps: no provider registers it.
func onNode(node string) harness.WorkloadOption {
	return func(d *appsv1.Deployment) {
		spec := &d.Spec.Template.Spec
		spec.Affinity = nil
		spec.NodeName = node
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: karpv1.UnregisteredTaintKey, Operator: corev1.TolerationOpExists})
	}
}

// Failure mode 1 (docs/cke-platform.md §7): a managed NodeGroup copied by hand, the way
// `kubectl get nodegroup <group> -o yaml`, a new name and `kubectl create` copy it, keeps the
// provider's labels and the annotation with its NodeClaim's UID, so it looks managed and names
// a live claim. When that claim goes, its own group is deleted with it; the copy is not that
// claim's launch (it is not named after it), so garbage collection refuses it, loudly, and
// the copy, its node and the pod running there survive.
func TestRenamedCopyOfAManagedGroupSurvivesItsClaim(t *testing.T) {
	s := harness.NewScenario(t, env)
	env.Cluster.Operator().Configure(harness.PlatformQuirks)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, 5*time.Second, harness.OnDemand)
	d := s.Deployment("original", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	claims, err := env.NodeClaims(s.Ctx, pool.Name)
	Expect(err).NotTo(HaveOccurred())
	Expect(claims).To(HaveLen(1))
	claim := claims[0]
	original := &ngv1.NodeGroup{}
	Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: claim.Name}, original)).To(Succeed())
	Expect(original.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClaimUID, string(claim.UID)))

	// What the copy keeps of `-o yaml`: labels, annotations, finalizers and the spec; the
	// server-set fields and the status go.
	copied := &ngv1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name:        original.Name + "-copy",
			Labels:      original.Labels,
			Annotations: original.Annotations,
			Finalizers:  original.Finalizers,
		},
		Spec: *original.Spec.DeepCopy(),
	}
	s.Create(copied)
	copiedAt := time.Now()
	copiedNode := ngv1.NodeName(copied.Name, 0)
	Eventually(func(g Gomega) {
		n := &corev1.Node{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: copiedNode}, n)).To(Succeed())
		g.Expect(sim.NodeReady(n)).To(BeTrue(), "the copy's node is Ready")
	}).WithTimeout(harness.LaunchTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	tenant := s.Deployment("on-the-copy", pool.Name, 1, "1", "1Gi", onNode(copiedNode))
	s.WaitRunning(tenant, 1, harness.LaunchTimeout)

	// The original claim goes: its empty node is consolidated away, and its group with it.
	s.Scale(d, 0)
	Eventually(func(g Gomega) {
		err := env.Client.Get(s.Ctx, client.ObjectKeyFromObject(&claim), &karpv1.NodeClaim{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the original NodeClaim is still there (%v)", err)
		err = env.Client.Get(s.Ctx, client.ObjectKey{Name: original.Name}, &ngv1.NodeGroup{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the original NodeGroup is still there (%v)", err)
		err = env.Client.Get(s.Ctx, client.ObjectKey{Name: ngv1.NodeName(original.Name, 0)}, &corev1.Node{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the original node is still there (%v)", err)
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())

	// The copy's claim UID now names no live claim: a pass runs on the original's deletion
	// and at least every DefaultPeriod, and reaping spares only groups younger than
	// reapGrace. For a whole period once the copy is past that, the copy, its node and its
	// pod stay.
	gone := time.Now()
	until := copiedAt.Add(reapGrace)
	if gone.After(until) {
		until = gone
	}
	until = until.Add(garbagecollection.DefaultPeriod + 15*time.Second)
	Consistently(func(g Gomega) {
		got := &ngv1.NodeGroup{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(copied), got)).To(Succeed(), "the copy")
		g.Expect(got.UID).To(Equal(copied.UID))
		g.Expect(got.DeletionTimestamp).To(BeNil(), "the copy is being deleted")
		n := &corev1.Node{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: copiedNode}, n)).To(Succeed(), "the copy's node")
		g.Expect(n.DeletionTimestamp).To(BeNil(), "the copy's node is being deleted")
		running, pods := s.RunningPods(tenant)
		g.Expect(running).To(Equal(1), "the pod on the copy")
		g.Expect(pods[0].Spec.NodeName).To(Equal(copiedNode))
	}).WithTimeout(time.Until(until)).WithPolling(time.Second).Should(Succeed())
	Expect(s.EventsSince(garbagecollection.ReasonReaped, copied.Name)).To(BeEmpty())
	// And it was said: the copy's creation kicked a pass, long before.
	evs := s.EventsSince(garbagecollection.ReasonRefused, copied.Name)
	Expect(evs).NotTo(BeEmpty(), "%s events on the copy", garbagecollection.ReasonRefused)
	Expect(evs[0].Message).To(ContainSubstring(nodegroup.ReasonNotNamedForItsClaim))
	Expect(s.Metric("karpenter_clevercloud_nodegroup_garbage_collection_refused", map[string]string{"reason": nodegroup.ReasonNotNamedForItsClaim})).To(BeNumerically(">=", 1))
}
