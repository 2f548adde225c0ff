package cloudprovider_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	provider "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

const quotaMessage = "Quota exceeded: RAM max: limit = 40.0 GB | actual = 48.0 GB"

func TestCreateLaunchesTheCheapestFittingFlavorAndWaitsForAcceptance(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	// 3 CPU / 4500Mi: 2XS (4 vCPU, ~3.6Gi allocatable) is too small, XS is the cheapest fit.
	nc := f.newClaim(g, "3", "4500Mi")
	done := f.create(nc)

	group := awaitGroup(g, nc.Name)
	g.Expect(group.Spec.Flavor).To(Equal("XS"))
	g.Expect(group.Spec.NodeCount).To(Equal(int32(1)))
	g.Expect(group.OwnerReferences).To(BeEmpty(), "a foreground deletion of the claim must not take the group with it")
	g.Expect(group.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClaimUID, string(nc.UID)))
	g.Expect(group.Labels).To(HaveKeyWithValue(v1alpha1.LabelNodeClaim, nc.Name))
	g.Expect(group.Labels).To(HaveKeyWithValue(v1alpha1.LabelNodeClass, f.class.Name))
	g.Expect(group.Labels).To(HaveKeyWithValue(karpv1.NodePoolLabelKey, "pool"))
	g.Expect(group.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClassHash, f.class.Hash()))
	g.Expect(group.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationNodeClassHashVersion, v1alpha1.NodeClassHashVersion))
	// The class's and claim's labels reach the node at join time, minus what the API refuses.
	g.Expect(group.Spec.Labels).To(HaveKeyWithValue("team", "platform"))
	g.Expect(group.Spec.Labels).To(HaveKeyWithValue("workload", "web"))
	g.Expect(group.Spec.Labels).NotTo(HaveKey("kubernetes.io/arch"))
	g.Expect(group.Spec.Taints).To(ConsistOf(
		ngv1.Taint{Key: karpv1.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute},
		ngv1.Taint{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule},
		ngv1.Taint{Key: "cni-not-ready", Effect: corev1.TaintEffectNoSchedule},
	))
	g.Consistently(done).WithTimeout(300 * time.Millisecond).ShouldNot(Receive())

	verdict(g, group, ngv1.PhaseSynced, accepted())
	var r result
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(r.Err).NotTo(HaveOccurred())
	g.Expect(r.Claim.Status.ProviderID).To(Equal("clevercloud://" + nc.Name))
	g.Expect(r.Claim.Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "XS"))
	g.Expect(r.Claim.Labels).To(HaveKeyWithValue(corev1.LabelTopologyZone, "par"))
	g.Expect(r.Claim.Labels).To(HaveKeyWithValue(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeOnDemand))
	g.Expect(r.Claim.Status.Capacity.Cpu().Value()).To(Equal(int64(6)))
	g.Expect(r.Claim.Status.Allocatable.Memory().Value()).To(Equal(int64(7553664*1024 - 100*1024*1024)))
}

func TestCreateHonoursRequirements(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	nc := f.newClaim(g, "1", "1Gi", karpv1.NodeSelectorRequirementWithMinValues{
		Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"M", "L"},
	})
	done := f.create(nc)
	group := awaitGroup(g, nc.Name)
	g.Expect(group.Spec.Flavor).To(Equal("M"))
	verdict(g, group, ngv1.PhaseSynced, accepted())
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(HaveField("Err", BeNil())))
}

func TestQuotaRejectionDeletesTheGroupAndRulesOutTheRefusedUse(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	nc := f.newClaim(g, "5", "6Gi") // XS
	done := f.create(nc)
	group := awaitGroup(g, nc.Name)
	verdict(g, group, ngv1.PhaseQuotaExceeded, quotaExceeded(quotaMessage))

	var r result
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(cloudprovider.IsInsufficientCapacityError(r.Err)).To(BeTrue(), "got %v", r.Err)
	g.Expect(r.Err.Error()).To(ContainSubstring(quotaMessage))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(group), &ngv1.NodeGroup{}))
	}).WithTimeout(10 * time.Second).Should(BeTrue())
	g.Expect(drainEvents(f.events)).To(ContainElement(ContainSubstring(provider.ReasonQuotaExceeded)))

	offered := func() map[string]bool { return quotaOffered(g, f, nil) }
	// The engine may keep the refused XS's reservation for minutes: nothing is offered that
	// it would refuse beside that leak.
	g.Expect(offered()).To(Equal(map[string]bool{"2XS": false, "XS": false, "S": false, "M": false, "L": false, "XL": false}))
	// Until it would have expired, the refused use stays ruled out too.
	f.clock.Step(quota.LeakLifetime - time.Second)
	g.Expect(offered()).To(Equal(map[string]bool{"2XS": false, "XS": false, "S": false, "M": false, "L": false, "XL": false}))

	// The memory fades with the leak: past it every flavor is offered again, so a quota freed
	// meanwhile (another cluster, a raise) is found by the next probe.
	g.Expect(quota.RefusalMemory).To(Equal(quota.LeakLifetime))
	f.clock.Step(time.Second)
	for name, ok := range offered() {
		g.Expect(ok).To(BeTrue(), name)
	}
}

func TestGroupVanishingDuringTheWaitIsInsufficientCapacity(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	nc := f.newClaim(g, "1", "1Gi")
	done := f.create(nc)
	group := awaitGroup(g, nc.Name)
	g.Expect(env.Client.Delete(context.Background(), group)).To(Succeed())
	var r result
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(cloudprovider.IsInsufficientCapacityError(r.Err)).To(BeTrue(), "got %v", r.Err)
	g.Expect(drainEvents(f.events)).To(ContainElement(ContainSubstring(provider.ReasonVanished)))
}

func TestNoVerdictInTimeProceeds(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Second)
	nc := f.newClaim(g, "1", "1Gi")
	var r result
	g.Eventually(f.create(nc)).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(r.Err).NotTo(HaveOccurred())
	g.Expect(r.Claim.Status.ProviderID).To(Equal("clevercloud://" + nc.Name))
	g.Expect(drainEvents(f.events)).To(ContainElement(ContainSubstring(provider.ReasonAcceptanceTimedOut)))
}

func TestRetriedCreateAdoptsItsOwnGroupAndDescribesItsRealFlavor(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	nc := f.newClaim(g, "1", "1Gi")
	// An earlier attempt launched an L and then the controller restarted.
	earlier := nodegroup.Build(nc, f.class, "L")
	g.Expect(env.Client.Create(context.Background(), earlier)).To(Succeed())
	verdict(g, earlier, ngv1.PhaseSynced, accepted())

	var r result
	g.Eventually(f.create(nc)).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(r.Err).NotTo(HaveOccurred())
	g.Expect(r.Claim.Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "L"))
	groups := &ngv1.NodeGroupList{}
	g.Expect(env.Client.List(context.Background(), groups)).To(Succeed())
	g.Expect(groups.Items).To(ContainElement(HaveField("Name", nc.Name)))
}

func TestCreateRefusesAGroupOfTheSameNameItDoesNotOwn(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	nc := f.newClaim(g, "1", "1Gi")
	other := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}, Spec: ngv1.NodeGroupSpec{Flavor: "S", NodeCount: 1}}
	g.Expect(env.Client.Create(context.Background(), other)).To(Succeed())
	var r result
	g.Eventually(f.create(nc)).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(r.Err).To(MatchError(nodegroup.ErrNotOurs))
}

func TestCreateNeedsAReadyNodeClass(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	nc := f.newClaim(g, "1", "1Gi")

	setReady(g, f.class, metav1.ConditionFalse)
	_, err := f.provider.Create(context.Background(), nc)
	g.Expect(cloudprovider.IsNodeClassNotReadyError(err)).To(BeTrue(), "got %v", err)

	f.class.Status.Conditions = nil
	g.Expect(env.Client.Status().Update(context.Background(), f.class)).To(Succeed())
	_, err = f.provider.Create(context.Background(), nc)
	g.Expect(err).To(HaveOccurred())
	g.Expect(cloudprovider.IsNodeClassNotReadyError(err)).To(BeFalse(), "an unreconciled class is retried, not failed")
	g.Expect(apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKey{Name: nc.Name}, &ngv1.NodeGroup{}))).To(BeTrue())
}

func TestGetAndListDegradeAndHideTerminatingGroups(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	ctx := context.Background()

	f.retire(t, g, "XL")
	live := nodegroup.Build(f.newClaim(g, "1", "1Gi"), f.class, "S")
	retired := nodegroup.Build(f.newClaim(g, "1", "1Gi"), f.class, "XL")
	dying := nodegroup.Build(f.newClaim(g, "1", "1Gi"), f.class, "S")
	dying.Finalizers = []string{"test.clever-cloud.com/hold"}
	unmanaged := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "pool-manual"}, Spec: ngv1.NodeGroupSpec{Flavor: "S", NodeCount: 3}}
	for _, o := range []*ngv1.NodeGroup{live, retired, dying, unmanaged} {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	g.Expect(env.Client.Delete(ctx, dying)).To(Succeed())
	t.Cleanup(func() {
		patch := client.MergeFrom(dying.DeepCopy())
		dying.Finalizers = nil
		_ = env.Client.Patch(ctx, dying, patch)
	})

	nc, err := f.provider.Get(ctx, "clevercloud://"+live.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nc.Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "S"))

	nc, err = f.provider.Get(ctx, "clevercloud://"+retired.Name)
	g.Expect(err).NotTo(HaveOccurred(), "a flavor that left the catalogue must not fail Get")
	g.Expect(nc.Labels).To(HaveKeyWithValue(corev1.LabelInstanceTypeStable, "XL"))

	_, err = f.provider.Get(ctx, "clevercloud://"+dying.Name)
	g.Expect(cloudprovider.IsNodeClaimNotFoundError(err)).To(BeTrue(), "a terminating group reads as gone, got %v", err)
	_, err = f.provider.Get(ctx, "clevercloud://"+unmanaged.Name)
	g.Expect(cloudprovider.IsNodeClaimNotFoundError(err)).To(BeTrue())
	_, err = f.provider.Get(ctx, "aws:///i-123")
	g.Expect(cloudprovider.IsNodeClaimNotFoundError(err)).To(BeTrue())

	list, err := f.provider.List(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	ids := []string{}
	for _, c := range list {
		ids = append(ids, c.Status.ProviderID)
	}
	g.Expect(ids).To(ContainElements("clevercloud://"+live.Name, "clevercloud://"+retired.Name))
	g.Expect(ids).NotTo(ContainElements("clevercloud://"+dying.Name, "clevercloud://"+unmanaged.Name))
}

func TestDeleteOnlyDeletesOwnedGroupsOnce(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	ctx := context.Background()

	nc := f.newClaim(g, "1", "1Gi")
	owned := nodegroup.Build(nc, f.class, "S")
	owned.Finalizers = []string{"test.clever-cloud.com/hold"} // the platform tears VMs down slowly
	g.Expect(env.Client.Create(ctx, owned)).To(Succeed())
	nc.Status.ProviderID = nodegroup.ProviderID(owned.Name)

	g.Expect(f.provider.Delete(ctx, nc)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(owned), owned)).To(Succeed())
	g.Expect(owned.DeletionTimestamp).NotTo(BeNil())
	err := f.provider.Delete(ctx, nc)
	g.Expect(cloudprovider.IsNodeClaimNotFoundError(err)).To(BeTrue(), "a terminating group is gone for Karpenter, got %v", err)
	patch := client.MergeFrom(owned.DeepCopy())
	owned.Finalizers = nil
	g.Expect(env.Client.Patch(ctx, owned, patch)).To(Succeed())
	g.Expect(cloudprovider.IsNodeClaimNotFoundError(f.provider.Delete(ctx, nc))).To(BeTrue())

	// A hand-made copy that carries our labels but no claim UID is never deleted.
	copied := f.newClaim(g, "1", "1Gi")
	lookalike := nodegroup.Build(copied, f.class, "S")
	delete(lookalike.Annotations, v1alpha1.AnnotationNodeClaimUID)
	g.Expect(env.Client.Create(ctx, lookalike)).To(Succeed())
	copied.Status.ProviderID = nodegroup.ProviderID(lookalike.Name)
	err = f.provider.Delete(ctx, copied)
	g.Expect(cloudprovider.IsNodeClaimNotFoundError(err)).To(BeTrue())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(lookalike), lookalike)).To(Succeed())
	g.Expect(lookalike.DeletionTimestamp).To(BeNil())
	g.Expect(drainEvents(f.events)).To(ContainElement(ContainSubstring(provider.ReasonDeleteRefused)))
}

func TestNodeClassChangeIsDrift(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	ctx := context.Background()
	nc := f.newClaim(g, "1", "1Gi")
	group := nodegroup.Build(nc, f.class, "S")
	g.Expect(env.Client.Create(ctx, group)).To(Succeed())
	nc.Status.ProviderID = nodegroup.ProviderID(group.Name)

	reason, err := f.provider.IsDrifted(ctx, nc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reason).To(BeEmpty())

	f.class.Spec.Labels["team"] = "data"
	g.Expect(env.Client.Update(ctx, f.class)).To(Succeed())
	reason, err = f.provider.IsDrifted(ctx, nc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reason).To(Equal(provider.DriftReasonNodeClass))
}

func TestARetiredFlavorIsDriftButAFullQuotaIsNot(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	ctx := context.Background()
	f.retire(t, g, "XL")
	claimFor := func(flavor string) *karpv1.NodeClaim {
		nc := f.newClaim(g, "1", "1Gi")
		group := nodegroup.Build(nc, f.class, flavor)
		g.Expect(env.Client.Create(ctx, group)).To(Succeed())
		nc.Status.ProviderID = nodegroup.ProviderID(group.Name)
		return nc
	}
	unknown, listed, dropped := claimFor("XL"), claimFor("S"), claimFor("L")

	// The price API stops listing L; the quota leaves no room at all.
	g.Expect(f.catalog.SetLive(catalog.Rates{Currency: "EUR", VCPUHourly: 0.00277777777, RAMGBHourly: 0.00555555555}, []string{"2XS", "XS", "S", "M"})).To(Succeed())
	f.quota.Learn("CPU", 1)
	f.quota.Observe(quota.Usage{CPU: 1, GB: 1}, nil)

	for nc, want := range map[*karpv1.NodeClaim]cloudprovider.DriftReason{unknown: provider.DriftReasonFlavorRetired, dropped: provider.DriftReasonFlavorRetired, listed: ""} {
		reason, err := f.provider.IsDrifted(ctx, nc)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reason).To(Equal(want), nc.Status.ProviderID)
	}
}

func TestStaticAnswers(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	g.Expect(f.provider.Name()).To(Equal("clevercloud"))
	g.Expect(f.provider.GetSupportedNodeClasses()).To(HaveLen(1))
	g.Expect(cloudprovider.IsNodeRebootNotImplementedError(f.provider.Reboot(context.Background(), &karpv1.NodeClaim{}, "op"))).To(BeTrue())
	fallbacks := 0
	for _, p := range f.provider.RepairPolicies() {
		g.Expect(p.Action).To(Equal(cloudprovider.ReplaceNode))
		if p.ReasonRegex == "" {
			fallbacks++
		}
	}
	g.Expect(fallbacks).To(Equal(1), "core requires exactly one fallback repair policy")
}

func TestFlavorsBeyondTheQuotaHeadroomAreUnavailableAndNeverLaunched(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	// 40 vCPU / 40 GB, two S control-plane nodes (16 vCPU / 24 GB): 24 vCPU / 16 GB left.
	f.quota.Learn("CPU", 40)
	f.quota.Learn("RAM", 40)
	f.quota.Observe(quota.Usage{CPU: 16, GB: 24}, nil)

	its, err := f.provider.GetInstanceTypes(context.Background(), &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool"}})
	g.Expect(err).NotTo(HaveOccurred())
	availability := map[string]bool{}
	for _, it := range its {
		availability[it.Name] = len(it.Offerings.Available()) > 0
	}
	g.Expect(availability).To(Equal(map[string]bool{"2XS": true, "XS": true, "S": true, "M": true, "L": false, "XL": false}))
	g.Expect(drainEvents(f.events)).To(ContainElement(SatisfyAll(ContainSubstring(provider.ReasonQuotaLimited), ContainSubstring("24 vCPU / 16 GB"))))

	// A claim only L satisfies is refused without a NodeGroup ever being created.
	nc := f.newClaim(g, "1", "1Gi", karpv1.NodeSelectorRequirementWithMinValues{
		Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"L"},
	})
	_, err = f.provider.Create(context.Background(), nc)
	g.Expect(cloudprovider.IsInsufficientCapacityError(err)).To(BeTrue(), "got %v", err)
	g.Expect(apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKey{Name: nc.Name}, &ngv1.NodeGroup{}))).To(BeTrue())

	// Two M at once: the first is admitted, the second would overcommit the quota.
	first, second := f.newClaim(g, "9", "10Gi"), f.newClaim(g, "9", "10Gi")
	firstDone := f.create(first)
	awaitGroup(g, first.Name)
	_, err = f.provider.Create(context.Background(), second)
	g.Expect(cloudprovider.IsInsufficientCapacityError(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("headroom"))
	group := awaitGroup(g, first.Name)
	verdict(g, group, ngv1.PhaseSynced, accepted())
	g.Eventually(firstDone).WithTimeout(10 * time.Second).Should(Receive(HaveField("Err", BeNil())))
}

// A launch that finds a quota probe in flight waits for its verdict. When the wait outlasts
// the acceptance timeout, Create fails in a way core retries with the claim kept: insufficient
// capacity would delete the claim, and its replacement would queue behind the same probe.
func TestALaunchBehindAnUnjudgedProbeIsRetriedNotDeleted(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	// Everything the tracker knows to fit is in use: the next launch is a probe.
	proven := quota.Usage{CPU: 40, GB: 40}
	f.quota.Record(quota.Observation{Usage: proven, Proven: proven, Groups: map[string]quota.Group{}})
	only2XS := karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"2XS"}}
	probe, behind := f.newClaim(g, "1", "1Gi", only2XS), f.newClaim(g, "1", "1Gi", only2XS)
	probeDone := f.create(probe)
	awaitGroup(g, probe.Name)
	g.Expect(f.quota.ProbesInFlight()).To(Equal(1))

	behindDone := f.create(behind)
	// The probe's own wait runs on the real clock; the fake clock's only timer is the admission
	// deadline of the launch behind it.
	g.Eventually(f.clock.HasWaiters).WithTimeout(10 * time.Second).Should(BeTrue())
	f.clock.Step(time.Minute)
	var r result
	g.Eventually(behindDone).WithTimeout(10 * time.Second).Should(Receive(&r))
	g.Expect(cloudprovider.IsInsufficientCapacityError(r.Err)).To(BeFalse(), "got %v", r.Err)
	var createErr *cloudprovider.CreateError
	g.Expect(errors.As(r.Err, &createErr)).To(BeTrue(), "got %v", r.Err)
	g.Expect(createErr.ConditionReason).To(Equal(provider.ConditionReasonAwaitingQuotaVerdict))
	g.Expect(createErr.ConditionMessage).To(ContainSubstring("2XS"))
	g.Expect(apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKey{Name: behind.Name}, &ngv1.NodeGroup{}))).
		To(BeTrue(), "nothing is sent beside a probe")

	// The platform accepts the probe; core's retry of the same claim is admitted and launched.
	verdict(g, awaitGroup(g, probe.Name), ngv1.PhaseSynced, accepted())
	g.Eventually(probeDone).WithTimeout(10 * time.Second).Should(Receive(HaveField("Err", BeNil())))
	retried := f.create(behind)
	verdict(g, awaitGroup(g, behind.Name), ngv1.PhaseSynced, accepted())
	g.Eventually(retried).WithTimeout(10 * time.Second).Should(Receive(HaveField("Err", BeNil())))
}

func TestAQuotaRejectionTeachesTheLimit(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	f.quota.Observe(quota.Usage{CPU: 16, GB: 24}, nil)
	nc := f.newClaim(g, "9", "10Gi") // M: 10 vCPU / 16 GB
	done := f.create(nc)
	verdict(g, awaitGroup(g, nc.Name), ngv1.PhaseQuotaExceeded, quotaExceeded("Quota exceeded: RAM max: limit = 36.0 GB | actual = 40.0 GB"))
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive())
	// The message says the memory limit; nothing says the vCPU one.
	g.Expect(f.quota.Limit()).To(Equal(quota.Limit{GB: 36}))
	h, known := f.quota.Headroom()
	g.Expect(known).To(BeTrue())
	g.Expect(h.GB).To(Equal(int64(36-24-16)), "the refused M's reservation may leak")
	f.clock.Step(quota.LeakLifetime)
	h, _ = f.quota.Headroom()
	g.Expect(h.GB).To(Equal(int64(12)))
}

// A claim whose provider ID names a hand-copied group (renamed; the labels and the claim UID
// annotation came along) does not own it: the copy is not named after the claim. Delete
// refuses it, says so, and still deletes the claim's own group.
func TestDeleteRefusesAGroupNotNamedForTheClaim(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, g, time.Minute)
	ctx := context.Background()
	nc := f.newClaim(g, "1", "1Gi")
	original := nodegroup.Build(nc, f.class, "S")
	g.Expect(env.Client.Create(ctx, original)).To(Succeed())
	copied := original.DeepCopy()
	copied.ObjectMeta = metav1.ObjectMeta{Name: original.Name + "-copy", Labels: original.Labels, Annotations: original.Annotations}
	g.Expect(env.Client.Create(ctx, copied)).To(Succeed())

	pointed := nc.DeepCopy()
	pointed.Status.ProviderID = nodegroup.ProviderID(copied.Name)
	err := f.provider.Delete(ctx, pointed)
	g.Expect(cloudprovider.IsNodeClaimNotFoundError(err)).To(BeTrue(), "got %v", err)
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(copied), copied)).To(Succeed())
	g.Expect(copied.DeletionTimestamp).To(BeNil(), "the copy survives")
	g.Expect(drainEvents(f.events)).To(ContainElement(SatisfyAll(
		ContainSubstring(provider.ReasonDeleteRefused), ContainSubstring(copied.Name), ContainSubstring(nodegroup.ReasonNotNamedForItsClaim))))

	// Nor does a refusal on the copy, handed over as if it were the claim's launch, delete it
	// or count as the claim's refusal. (Its event is the one above, deduplicated.)
	verdict(g, copied, ngv1.PhaseQuotaExceeded, quotaExceeded(""))
	refusals := func() float64 {
		n := 0.0
		for _, resource := range []string{"unknown", "RAM", "CPU"} {
			n += counterValue(provider.QuotaRejections.WithLabelValues("S", resource))
		}
		return n
	}
	before := refusals()
	f.provider.RecordRefusal(ctx, nc, copied, nodegroup.Judge(copied))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(copied), copied)).To(Succeed())
	g.Expect(copied.DeletionTimestamp).To(BeNil(), "the copy survives")
	g.Expect(refusals()).To(Equal(before))

	nc.Status.ProviderID = nodegroup.ProviderID(original.Name)
	g.Expect(f.provider.Delete(ctx, nc)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(original), &ngv1.NodeGroup{}))
	}).WithTimeout(10 * time.Second).Should(BeTrue())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(copied), copied)).To(Succeed())
	g.Expect(copied.DeletionTimestamp).To(BeNil())
	g.Expect(env.Client.Delete(ctx, copied)).To(Succeed())
}
