package providerid_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/karpenter/pkg/events"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/providerid"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

func providerIDOf(g Gomega, nodeName string) func() string {
	return func() string {
		node := &corev1.Node{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: nodeName}, node)).To(Succeed())
		return node.Spec.ProviderID
	}
}

// notStamped waits for the stamper's refusal event about a group, so that "never stamped" is
// asserted after the stamper has looked at the node and decided, not after a guessed delay.
// got keeps every event drained so far: one wait must not lose the event another waits for.
func notStamped(g Gomega, got *[]string, group, says string) {
	g.Eventually(func() []string {
		*got = append(*got, testenv.Drain(seen.Events)...)
		return *got
	}).WithTimeout(testenv.Wait).Should(ContainElement(SatisfyAll(
		ContainSubstring(providerid.ReasonNotStamped), ContainSubstring("NodeGroup "+group+" "), ContainSubstring(says))))
}

func TestProviderIDIsStampedOnNode0OfAManagedOneNodeGroupOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := env.NewClass(g, nil)

	// The node may join before the provider's cache sees its group: the group's arrival retries.
	nc := env.NewClaim(g, class.Name)
	group := nodegroup.Build(nc, class, "S")
	node := env.NewNode(g, ngv1.NodeName(group.Name, 0), group.Name, "S", nil)
	g.Consistently(providerIDOf(g, node.Name)).WithTimeout(500 * time.Millisecond).Should(BeEmpty())
	g.Expect(env.Client.Create(ctx, group)).To(Succeed())
	g.Eventually(providerIDOf(g, node.Name)).WithTimeout(testenv.Wait).Should(Equal("clevercloud://" + group.Name))

	// Resized by hand to two nodes: neither node gets an ID, so no ID ever names two nodes.
	nc2 := env.NewClaim(g, class.Name)
	resized := nodegroup.Build(nc2, class, "S")
	resized.Spec.NodeCount = 2
	g.Expect(env.Client.Create(ctx, resized)).To(Succeed())
	n0 := env.NewNode(g, ngv1.NodeName(resized.Name, 0), resized.Name, "S", nil)
	n1 := env.NewNode(g, ngv1.NodeName(resized.Name, 1), resized.Name, "S", nil)
	var got []string
	notStamped(g, &got, resized.Name, "asks for 2 nodes")
	g.Expect(providerIDOf(g, n0.Name)()).To(BeEmpty())
	g.Expect(providerIDOf(g, n1.Name)()).To(BeEmpty())

	// A pool the provider did not launch is not its business.
	manual := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("manual")}, Spec: ngv1.NodeGroupSpec{Flavor: "S", NodeCount: 1}}
	g.Expect(env.Client.Create(ctx, manual)).To(Succeed())
	m0 := env.NewNode(g, ngv1.NodeName(manual.Name, 0), manual.Name, "S", nil)
	g.Consistently(providerIDOf(g, m0.Name)).WithTimeout(time.Second).Should(BeEmpty())
}

// A provider ID makes Karpenter adopt a node, so the stamper asks for the same proof as the
// destructive paths: the UID of a NodeClaim that an uncached read finds alive.
func TestProviderIDNeedsProofOfOwnership(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := env.NewClass(g, nil)
	claim := env.NewClaim(g, class.Name)
	owned := nodegroup.Build(claim, class, "S")

	// Hand-copied manifests of a managed group, under another name (a name is unique): one
	// without the claim UID, one that kept it and so points at a live claim.
	noOwner := owned.DeepCopy()
	noOwner.Name = testenv.Name("copied")
	delete(noOwner.Annotations, v1alpha1.AnnotationNodeClaimUID)
	keptOwner := owned.DeepCopy()
	keptOwner.Name = testenv.Name("copied")
	for _, copied := range []*ngv1.NodeGroup{noOwner, keptOwner} {
		g.Expect(env.Client.Create(ctx, copied)).To(Succeed())
	}
	g.Expect(env.Client.Create(ctx, owned)).To(Succeed())
	copiedNode := env.NewNode(g, ngv1.NodeName(noOwner.Name, 0), noOwner.Name, "S", nil)
	keptNode := env.NewNode(g, ngv1.NodeName(keptOwner.Name, 0), keptOwner.Name, "S", nil)
	ownedNode := env.NewNode(g, ngv1.NodeName(owned.Name, 0), owned.Name, "S", nil)

	g.Eventually(providerIDOf(g, ownedNode.Name)).WithTimeout(testenv.Wait).Should(Equal("clevercloud://" + owned.Name))
	var got []string
	notStamped(g, &got, noOwner.Name, "no NodeClaim UID")
	notStamped(g, &got, keptOwner.Name, "do not both name the group")
	g.Expect(providerIDOf(g, copiedNode.Name)()).To(BeEmpty())
	g.Expect(providerIDOf(g, keptNode.Name)()).To(BeEmpty())

	// A group whose owner claim is gone is an orphan for garbage collection, not a node to adopt.
	gone := env.NewClaim(g, class.Name)
	orphan := nodegroup.Build(gone, class, "S")
	g.Expect(env.Client.Create(ctx, orphan)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, gone)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(gone), gone))
	}).WithTimeout(testenv.Wait).Should(BeTrue())
	orphanNode := env.NewNode(g, ngv1.NodeName(orphan.Name, 0), orphan.Name, "S", nil)
	notStamped(g, &got, orphan.Name, "is gone")
	g.Expect(providerIDOf(g, orphanNode.Name)()).To(BeEmpty())
}

// staleNodes reads nodes as a cache that has not seen their provider ID yet, and counts the
// node patches sent through it.
type staleNodes struct {
	client.Client
	patches atomic.Int32
}

func (s *staleNodes) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := s.Client.Get(ctx, key, obj, opts...)
	if n, isNode := obj.(*corev1.Node); isNode {
		n.Spec.ProviderID = ""
	}
	return err
}

func (s *staleNodes) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, isNode := obj.(*corev1.Node); isNode {
		s.patches.Add(1)
	}
	return s.Client.Patch(ctx, obj, patch, opts...)
}

// Under load the cache lags: the group's status moves (each move asks for node0 again) before
// the cache shows the stamp. A node is stamped once all the same, not once per move.
func TestANodeIsStampedOnceWhileTheCacheLags(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	_, group := env.NewOwnedGroup(g, "S")
	node := env.NewNode(g, ngv1.NodeName(group.Name, 0), group.Name, "S", nil)

	lagging := &staleNodes{Client: env.Client}
	stamper := providerid.New(lagging, env.Client, events.NewRecorder(record.NewFakeRecorder(10)))
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(node)}
	for range 3 {
		_, err := stamper.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(providerIDOf(g, node.Name)()).To(Equal("clevercloud://" + group.Name))
	g.Expect(lagging.patches.Load()).To(BeEquivalentTo(1), "patches of the node")
}
