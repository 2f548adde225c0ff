package garbagecollection_test

import (
	"context"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/garbagecollection"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

func TestGarbageCollection(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := env.NewClass(g, nil)

	alive := env.NewClaim(g, class.Name)
	kept := nodegroup.Build(alive, class, "S")
	gone := env.NewClaim(g, class.Name)
	orphan := nodegroup.Build(gone, class, "S")
	lookalike := nodegroup.Build(env.NewClaim(g, class.Name), class, "S")
	lookalike.Name = testenv.Name("copied")
	delete(lookalike.Annotations, v1alpha1.AnnotationNodeClaimUID)
	for _, o := range []*ngv1.NodeGroup{kept, orphan, lookalike} {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	g.Expect(env.Client.Delete(ctx, gone)).To(Succeed())

	// Within the grace period a group whose claim is not visible yet is left alone.
	g.Expect(gc.Collect(ctx)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(orphan), orphan)).To(Succeed())

	gcClock.Step(time.Minute)
	g.Expect(gc.Collect(ctx)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(orphan), &ngv1.NodeGroup{}))
	}).WithTimeout(testenv.Wait).Should(BeTrue(), "a group whose owner NodeClaim is gone is reaped")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kept), kept)).To(Succeed())
	g.Expect(kept.DeletionTimestamp).To(BeNil())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(lookalike), lookalike)).To(Succeed())
	g.Expect(lookalike.DeletionTimestamp).To(BeNil(), "a group that names no NodeClaim UID is never deleted")
}

// Groups launched by the upstream provider or by earlier versions of this one name their claim
// in an owner reference, which lets Kubernetes' garbage collector delete the group (and the
// VM) as soon as the claim is deleted with foreground propagation, before the drain. A pass
// moves them to the claim UID annotation, keeping the same claim and every other owner.
func TestGarbageCollectionMigratesOwnerReferences(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := env.NewClass(g, nil)
	claim := env.NewClaim(g, class.Name)
	legacy := nodegroup.Build(claim, class, "S")
	delete(legacy.Annotations, v1alpha1.AnnotationNodeClaimUID)
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep-me", UID: "cm-uid"}
	legacy.OwnerReferences = []metav1.OwnerReference{
		other,
		{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: claim.Name, UID: claim.UID, BlockOwnerDeletion: ptr.To(true)},
	}
	g.Expect(env.Client.Create(ctx, legacy)).To(Succeed())

	g.Expect(gc.Collect(ctx)).To(Succeed())
	got := &ngv1.NodeGroup{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(legacy), got)).To(Succeed())
	g.Expect(got.OwnerReferences).To(Equal([]metav1.OwnerReference{other}), "only the NodeClaim reference goes")
	g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClaimUID, string(claim.UID)))
	g.Expect(got.DeletionTimestamp).To(BeNil())
	proven, err := nodegroup.ConfirmOwner(ctx, env.Client, got)
	g.Expect(err).NotTo(HaveOccurred(), "still provably the claim's after the move")
	g.Expect(proven.UID).To(Equal(claim.UID))

	// A second pass has nothing left to move and changes nothing.
	g.Expect(gc.Collect(ctx)).To(Succeed())
	again := &ngv1.NodeGroup{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(legacy), again)).To(Succeed())
	g.Expect(again.ResourceVersion).To(Equal(got.ResourceVersion))
}

func TestLaunchedClaimWhoseGroupVanishedIsFastFailed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := env.NewClass(g, nil)
	nc := env.NewClaim(g, class.Name)
	nc.Status.ProviderID = nodegroup.ProviderID(nc.Name) // its group never made it, or vanished
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	g.Expect(env.Client.Status().Update(ctx, nc)).To(Succeed())

	registered := env.NewClaim(g, class.Name)
	registered.Status.ProviderID = nodegroup.ProviderID(registered.Name)
	registered.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	registered.StatusConditions().SetTrue(karpv1.ConditionTypeRegistered)
	g.Expect(env.Client.Status().Update(ctx, registered)).To(Succeed())

	g.Expect(gc.Collect(ctx)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(nc), &karpv1.NodeClaim{}))
	}).WithTimeout(testenv.Wait).Should(BeTrue())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(registered), registered)).To(Succeed(), "registered claims are core's to judge")
}

// A managed group copied by hand (kubectl get -o yaml, renamed, created) keeps its labels and
// its annotations, the claim UID included. Once the claim goes, the original is reaped and
// the copy, which names a claim that is not its own, is refused, loudly, and survives: deleting
// it would take down its VM and every pod on it.
func TestAHandCopiedGroupUnderAnotherNameSurvivesItsClaim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, original := env.NewOwnedGroup(g, "S")
	copied := original.DeepCopy()
	copied.ObjectMeta = metav1.ObjectMeta{
		Name:        testenv.Name(original.Name + "-copy"),
		Labels:      original.Labels,
		Annotations: original.Annotations,
	}
	g.Expect(env.Client.Create(ctx, copied)).To(Succeed())
	g.Expect(copied.Labels).To(Equal(original.Labels))
	g.Expect(copied.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClaimUID, string(claim.UID)))
	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())

	clk := clocktesting.NewFakeClock(time.Now().Add(time.Minute)) // past the grace of both groups
	recorder := &namedRecorder{events: make(chan string, 100)}
	collector := garbagecollection.New(env.Client, env.Client, events.NewRecorder(recorder), clk, time.Minute)
	g.Expect(collector.Collect(ctx)).To(Succeed())

	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(original), &ngv1.NodeGroup{}))
	}).WithTimeout(testenv.Wait).Should(BeTrue(), "the original, named after its gone claim, is reaped")
	got := &ngv1.NodeGroup{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(copied), got)).To(Succeed())
	g.Expect(got.DeletionTimestamp).To(BeNil(), "the copy is not the claim's: never deleted")
	seen := recorder.drain()
	g.Expect(seen).To(ContainElement(SatisfyAll(
		HavePrefix(garbagecollection.ReasonRefused+" "+copied.Name+":"),
		ContainSubstring(nodegroup.ReasonNotNamedForItsClaim),
	)), "the refusal is on the copy and says why")
	g.Expect(seen).To(ContainElement(HavePrefix(garbagecollection.ReasonReaped + " " + original.Name + ":")))
	refused := garbagecollection.Refused(nodegroup.ReasonNotNamedForItsClaim)
	g.Expect(refused).To(BeNumerically(">=", 1), "the refused metric counts the copy")

	// Later passes leave it alone too, and the metric drops once it is gone.
	g.Expect(collector.Collect(ctx)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(copied), got)).To(Succeed())
	g.Expect(got.DeletionTimestamp).To(BeNil())
	g.Expect(env.Client.Delete(ctx, copied)).To(Succeed())
	g.Eventually(func() float64 {
		g.Expect(collector.Collect(ctx)).To(Succeed())
		return garbagecollection.Refused(nodegroup.ReasonNotNamedForItsClaim)
	}).WithTimeout(testenv.Wait).Should(Equal(refused - 1))
}

// The claim handler is given the informer's shared object, which core's predicates read at the
// same moment: it reads it and never writes to it. Filling in a new claim's missing conditions
// in place raced core's reboot predicate and crashed the controller under load.
func TestTheClaimHandlerOnlyReadsTheSharedClaim(t *testing.T) {
	g := NewWithT(t)
	c := garbagecollection.New(nil, nil, nil, clocktesting.NewFakeClock(time.Now()), time.Minute)
	fresh := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}
	awaiting := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "awaiting"}}
	awaiting.Status.Conditions = []status.Condition{{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionTrue}}

	for nc, kicks := range map[*karpv1.NodeClaim]bool{fresh: false, awaiting: true} {
		before := nc.DeepCopy()
		c.KickIfAwaitingRegistration(nc)
		g.Expect(nc).To(Equal(before), "%s: the handler changed the shared object", nc.Name)
		g.Expect(c.Kicked()).To(Equal(kicks), "%s: a launched, unregistered claim kicks a pass; a new one does not", nc.Name)
	}
}

// legacyGroup is a group as the upstream provider or an earlier version of this one launched it
// for a claim: named and labelled after the claim, which it names in an owner reference only.
func legacyGroup(g Gomega, class *v1alpha1.CleverNodeClass, claim *karpv1.NodeClaim) *ngv1.NodeGroup {
	legacy := nodegroup.Build(claim, class, "S")
	delete(legacy.Annotations, v1alpha1.AnnotationNodeClaimUID)
	legacy.OwnerReferences = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: claim.Name, UID: claim.UID}}
	g.Expect(env.Client.Create(context.Background(), legacy)).To(Succeed())
	return legacy
}

// unchanged says the group is exactly as it was: same object, not written since.
func unchanged(g Gomega, want *ngv1.NodeGroup) {
	got := &ngv1.NodeGroup{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(want), got)).To(Succeed())
	g.Expect(got.UID).To(Equal(want.UID))
	g.Expect(got.ResourceVersion).To(Equal(want.ResourceVersion), "%s was written to", want.Name)
	g.Expect(got.DeletionTimestamp).To(BeNil())
}

// Moving a claim off an owner reference is a write to the group, so it goes through the one
// ownership proof first. A legacy group copied by hand (kubectl get -o yaml, renamed, created)
// keeps its labels and its owner reference to the live claim: it is refused and never patched,
// owner reference and all, while the genuine group, named after its claim, still migrates.
func TestOnlyAProvenGroupIsMigrated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := env.NewClass(g, nil)
	claim := env.NewClaim(g, class.Name)
	genuine := legacyGroup(g, class, claim)
	copied := genuine.DeepCopy()
	copied.ObjectMeta = metav1.ObjectMeta{
		Name:            testenv.Name(genuine.Name + "-copy"),
		Labels:          genuine.Labels,
		Annotations:     genuine.Annotations,
		OwnerReferences: genuine.OwnerReferences,
	}
	g.Expect(env.Client.Create(ctx, copied)).To(Succeed())
	// A legacy group whose claim is gone: the proof fails on the uncached claim read, so it is
	// not written either (within the grace, not reaped).
	gone := env.NewClaim(g, class.Name)
	orphan := legacyGroup(g, class, gone)
	g.Expect(env.Client.Delete(ctx, gone)).To(Succeed())

	recorder := &namedRecorder{events: make(chan string, 100)}
	collector := garbagecollection.New(env.Client, env.Client, events.NewRecorder(recorder), clocktesting.NewFakeClock(time.Now()), time.Minute)
	g.Expect(collector.Collect(ctx)).To(Succeed())

	unchanged(g, copied)
	unchanged(g, orphan)
	g.Expect(recorder.drain()).To(ContainElement(SatisfyAll(
		HavePrefix(garbagecollection.ReasonRefused+" "+copied.Name+":"),
		ContainSubstring(nodegroup.ReasonNotNamedForItsClaim),
	)), "the copy is refused, and says why")
	got := &ngv1.NodeGroup{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(genuine), got)).To(Succeed())
	g.Expect(got.OwnerReferences).To(BeEmpty(), "the genuine group is migrated")
	g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClaimUID, string(claim.UID)))

	// Later passes leave the copy as it is too.
	g.Expect(collector.Collect(ctx)).To(Succeed())
	unchanged(g, copied)
}

// The proof is made on the group as the apiserver holds it, and the write is conditional on
// that: a group changed between the proof's reads and the patch is not written, and the next
// pass proves it again and migrates it.
func TestAMigrationIsConditionalOnTheProvenGroup(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	class := env.NewClass(g, nil)
	claim := env.NewClaim(g, class.Name)
	legacy := legacyGroup(g, class, claim)

	// The group changes right after the proof's uncached claim read, before the patch.
	reader := &changingReader{Reader: env.Client, claim: claim.Name, change: func() {
		current := &ngv1.NodeGroup{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(legacy), current)).To(Succeed())
		patch := client.MergeFrom(current.DeepCopy())
		current.Labels["example.com/touched"] = "true"
		g.Expect(env.Client.Patch(ctx, current, patch)).To(Succeed())
	}}
	collector := garbagecollection.New(env.Client, reader, events.NewRecorder(&namedRecorder{events: make(chan string, 100)}), clocktesting.NewFakeClock(time.Now()), time.Minute)
	g.Expect(collector.Collect(ctx)).To(Succeed())
	g.Expect(reader.changed).To(BeTrue(), "the claim was read uncached before the write")
	got := &ngv1.NodeGroup{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(legacy), got)).To(Succeed())
	g.Expect(got.Labels).To(HaveKeyWithValue("example.com/touched", "true"))
	g.Expect(got.OwnerReferences).To(HaveLen(1), "a group changed after its proof is not written")
	g.Expect(got.Annotations).NotTo(HaveKey(v1alpha1.AnnotationNodeClaimUID))

	g.Expect(collector.Collect(ctx)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(legacy), got)).To(Succeed())
	g.Expect(got.OwnerReferences).To(BeEmpty(), "the next pass proves it again and migrates it")
	g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClaimUID, string(claim.UID)))
}

// changingReader is an uncached reader that runs change once, right after the first read of
// the named NodeClaim.
type changingReader struct {
	client.Reader
	claim   string
	change  func()
	changed bool
}

func (r *changingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*karpv1.NodeClaim); ok && key.Name == r.claim && !r.changed {
		r.changed = true
		r.change()
	}
	return err
}
