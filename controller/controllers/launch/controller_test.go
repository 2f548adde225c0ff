package launch_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/launch"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

const wait = 15 * time.Second

var seq atomic.Int32

func creating() metav1.Condition {
	return metav1.Condition{Type: ngv1.ConditionReconcileInProgress, Status: metav1.ConditionTrue, Reason: ngv1.ReasonCreating}
}

func synced() metav1.Condition {
	return metav1.Condition{Type: ngv1.ConditionReady, Status: metav1.ConditionTrue, Reason: ngv1.ReasonSynced}
}

func failed(reason, msg string) metav1.Condition {
	return metav1.Condition{Type: ngv1.ConditionReconcileFailed, Status: metav1.ConditionTrue, Reason: reason, Message: msg}
}

// setStatus plays the node-group operator: it replaces the group's status.
func setStatus(g Gomega, group *ngv1.NodeGroup, phase string, conds ...metav1.Condition) {
	ctx := context.Background()
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(group), group)).To(Succeed())
	for i := range conds {
		conds[i].LastTransitionTime = metav1.Now()
	}
	group.Status.Phase = phase
	group.Status.Conditions = conds
	g.Expect(env.Client.Status().Update(ctx, group)).To(Succeed())
	inCache(g, group)
}

// setClaimCondition sets a condition of the claim as Karpenter core does.
func setClaimCondition(g Gomega, claim *karpv1.NodeClaim, conditionType string) {
	ctx := context.Background()
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
	claim.StatusConditions().SetTrue(conditionType)
	g.Expect(env.Client.Status().Update(ctx, claim)).To(Succeed())
	inCache(g, claim)
}

// newLaunch is what Create leaves behind: a NodeClaim launched (provider ID, Launched) on its
// NodeGroup, with the operator's status so far.
func newLaunch(t *testing.T, g Gomega, flavor, phase string, conds ...metav1.Condition) (*karpv1.NodeClaim, *ngv1.NodeGroup) {
	t.Helper()
	ctx := context.Background()
	claim := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("launch-%d", seq.Add(1)), Labels: map[string]string{karpv1.NodePoolLabelKey: "pool"}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: v1alpha1.Group, Kind: "CleverNodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
		},
	}
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	group := nodegroup.Build(claim, &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, flavor)
	g.Expect(env.Client.Create(ctx, group)).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, group)
		_ = env.Client.Delete(ctx, claim)
		NewWithT(t).Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(claim), &karpv1.NodeClaim{}))
		}).WithTimeout(wait).Should(BeTrue())
	})
	if phase != "" || len(conds) > 0 {
		setStatus(g, group, phase, conds...)
	}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
	claim.Status.ProviderID = nodegroup.ProviderID(group.Name)
	claim.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	g.Expect(env.Client.Status().Update(ctx, claim)).To(Succeed())
	inCache(g, claim)
	inCache(g, group)
	return claim, group
}

func gone(obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)))
	}
}

// value reads a counter or a gauge (prometheus/testutil pulls a module go.mod does not require).
func value(m prometheus.Metric) float64 {
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		panic(err)
	}
	if pb.Counter != nil {
		return pb.GetCounter().GetValue()
	}
	return pb.GetGauge().GetValue()
}

func available(g Gomega, flavor string) bool {
	its, err := provider.GetInstanceTypes(context.Background(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	for _, it := range its {
		if it.Name == flavor {
			return len(it.Offerings.Available()) > 0
		}
	}
	return false
}

// A refusal published after Create returned fails the launch now: the claim is deleted, so
// core plans again at once, and the refusal is booked as Create books one.
func TestARefusalAfterLaunchDeletesTheClaim(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flavor string
		before []metav1.Condition // the status when Create returned
		phase  string
		refuse metav1.Condition
		event  string
	}{
		{"quota after a Create that timed out", "XS", nil, ngv1.PhaseQuotaExceeded, failed(ngv1.ReasonQuotaExceeded, ""), cloudprovider.ReasonQuotaExceeded},
		{"quota even after Creating", "M", []metav1.Condition{creating()}, ngv1.PhaseQuotaExceeded, failed(ngv1.ReasonQuotaExceeded, ""), cloudprovider.ReasonQuotaExceeded},
		{"an unknown reason on a group never accepted", "L", nil, "Failed", failed("RegionClosed", "no capacity"), cloudprovider.ReasonRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			phase := ""
			if tc.before != nil {
				phase = ngv1.PhaseCreating
			}
			claim, group := newLaunch(t, g, tc.flavor, phase, tc.before...)
			late := launch.LateRefusals.WithLabelValues(tc.refuse.Reason)
			before := value(late)

			setStatus(g, group, tc.phase, append(tc.before, tc.refuse)...)
			g.Eventually(gone(claim)).WithTimeout(wait).Should(BeTrue(), "the claim of a refused launch is deleted")
			g.Eventually(gone(group)).WithTimeout(wait).Should(BeTrue(), "the refused group is deleted")
			g.Eventually(func() []string { return seen.about(group.Name) }).WithTimeout(wait).Should(ContainElements(
				ContainSubstring(launch.ReasonRefusedAfterLaunch), ContainSubstring(tc.event)))
			g.Expect(value(late)).To(Equal(before + 1))
			// The bookkeeping itself (flavors set aside, quota memory) is RecordRefusal's, tested
			// with a fresh provider in the cloudprovider package; here it shows it was called.
			g.Expect(available(g, tc.flavor)).To(BeFalse(), "the refused flavor is set aside, as Create does")
		})
	}
}

// The claim registers between the follower's uncached read and its delete: the delete's
// resourceVersion precondition fails, and the follower, judging again, leaves the now
// registered claim alone.
func TestARegisteredClaimIsNeverDeleted(t *testing.T) {
	g := NewWithT(t)
	claim, group := newLaunch(t, g, "S", ngv1.PhaseCreating, creating())
	raced := make(chan struct{})
	hooks.set(claim.Name, func() {
		setClaimCondition(g, claim.DeepCopy(), karpv1.ConditionTypeRegistered)
		close(raced)
	})
	before := value(launch.LateRefusals.WithLabelValues(ngv1.ReasonQuotaExceeded))

	setStatus(g, group, ngv1.PhaseQuotaExceeded, creating(), failed(ngv1.ReasonQuotaExceeded, ""))
	g.Eventually(raced).WithTimeout(wait).Should(BeClosed(), "the follower read the claim to fail its launch")
	g.Consistently(func(g Gomega) {
		current := &karpv1.NodeClaim{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(claim), current)).To(Succeed())
		g.Expect(current.DeletionTimestamp).To(BeNil())
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(group), &ngv1.NodeGroup{})).To(Succeed())
	}).WithTimeout(2 * time.Second).Should(Succeed())
	g.Expect(seen.about(group.Name)).NotTo(ContainElement(ContainSubstring(launch.ReasonRefusedAfterLaunch)))
	g.Expect(value(launch.LateRefusals.WithLabelValues(ngv1.ReasonQuotaExceeded))).To(Equal(before))
}

// A transient failure is surfaced, once per reason, and nothing is deleted for it; an
// unknown reason is transient on a group the follower saw accepted, even once the status no
// longer shows it.
func TestATransientFailureIsSurfacedAndNothingDeleted(t *testing.T) {
	g := NewWithT(t)
	claim, group := newLaunch(t, g, "S", ngv1.PhaseCreating, creating())
	upstream := launch.TransientFailures.WithLabelValues(ngv1.ReasonUpstreamError)
	unknown := launch.TransientFailures.WithLabelValues("VMBootFailed")
	beforeUpstream, beforeUnknown := value(upstream), value(unknown)

	setStatus(g, group, ngv1.PhaseUpstreamError, creating(), failed(ngv1.ReasonUpstreamError, "API error: RequestDidntReturnSuccess"))
	g.Eventually(func() float64 { return value(upstream) }).WithTimeout(wait).Should(Equal(beforeUpstream + 1))
	g.Eventually(func() []string { return seen.about(group.Name) }).WithTimeout(wait).Should(ContainElement(
		SatisfyAll(ContainSubstring(cloudprovider.ReasonTransientFailure), ContainSubstring("RequestDidntReturnSuccess"))))

	// The follower saw Creating: a reason it does not know is transient, not a refusal.
	setStatus(g, group, "Failed", failed("VMBootFailed", "boot timed out, retrying"))
	g.Eventually(func() float64 { return value(unknown) }).WithTimeout(wait).Should(Equal(beforeUnknown + 1))

	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(claim), claim)).To(Succeed())
	g.Expect(claim.DeletionTimestamp).To(BeNil())
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(group), group)).To(Succeed())
	g.Expect(group.DeletionTimestamp).To(BeNil())
	g.Expect(value(upstream)).To(Equal(beforeUpstream+1), "surfaced once per reason")
}

// A group still not Synced overdueAfter after its creation is surfaced (gauge, event) and
// nothing is deleted; the gauge drops once it syncs. The fake clock crosses the threshold.
func TestALaunchThatNeverSyncsIsSurfacedAsOverdue(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// The apiserver stamps creation in real time: start the fake clock there (earlier tests,
	// or an earlier -count run, stepped it).
	clk.SetTime(time.Now())
	claim, group := newLaunch(t, g, "S", ngv1.PhaseCreating, creating())
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(claim)}

	// Before the threshold the follower asks to be woken when it passes.
	g.Eventually(func(g Gomega) {
		res, err := follower.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		left := overdueAfter - clk.Since(group.CreationTimestamp.Time)
		g.Expect(res.RequeueAfter).To(BeNumerically("~", left, time.Minute))
		g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	}).WithTimeout(wait).Should(Succeed())
	g.Expect(follower.Overdue()).To(Equal(0))

	clk.Step(overdueAfter - clk.Since(group.CreationTimestamp.Time) + time.Second)
	// Any event on the claim makes the follower look again (the requeue does in production).
	setClaimCondition(g, claim.DeepCopy(), karpv1.ConditionTypeRegistered) // the node joined while Creating
	g.Eventually(func() float64 { return value(launch.LaunchesOverdue) }).WithTimeout(wait).Should(Equal(1.0))
	g.Expect(follower.Overdue()).To(Equal(1))
	g.Eventually(func() []string { return seen.about(group.Name) }).WithTimeout(wait).Should(ContainElement(ContainSubstring(launch.ReasonSyncOverdue)))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
	g.Expect(claim.DeletionTimestamp).To(BeNil(), "an overdue launch is surfaced, never deleted")

	setStatus(g, group, ngv1.PhaseSynced, synced())
	g.Eventually(func() float64 { return value(launch.LaunchesOverdue) }).WithTimeout(wait).Should(Equal(0.0))
	g.Expect(follower.Overdue()).To(Equal(0))
}

// A launch ends when its node registered on a built group. Core writes the claim again on
// every pod event of its node: at hundreds of nodes those writes became a read each. An ended
// launch is not read again, whatever changes.
func TestAnEndedLaunchIsNotReadAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, group := newLaunch(t, g, "S", ngv1.PhaseCreating, creating())
	g.Eventually(func() int64 { return readsOf(claim.Name) }).WithTimeout(wait).ShouldNot(BeZero(), "the follower reads a launch it follows")

	setClaimCondition(g, claim.DeepCopy(), karpv1.ConditionTypeRegistered)
	setStatus(g, group, ngv1.PhaseSynced, synced())
	g.Eventually(func() bool { return follower.Ended(claim.UID) }).WithTimeout(wait).Should(BeTrue())

	before := readsOf(claim.Name)
	for i := range 5 {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		claim.Status.LastPodEventTime = metav1.NewTime(time.Now().Add(time.Duration(i) * time.Second))
		g.Expect(env.Client.Status().Update(ctx, claim)).To(Succeed())
	}
	setStatus(g, group, ngv1.PhaseSynced, synced(), failed(ngv1.ReasonUpstreamError, "a resize failed"))
	// A launch that has not ended, changed after them, is read: the writes above were seen.
	other, _ := newLaunch(t, g, "S", ngv1.PhaseCreating, creating())
	g.Eventually(func() int64 { return readsOf(other.Name) }).WithTimeout(wait).ShouldNot(BeZero())
	g.Consistently(func() int64 { return readsOf(claim.Name) }).WithTimeout(time.Second).Should(Equal(before),
		"reads of an ended launch's claim")

	// Deleted, its UID is forgotten.
	g.Expect(env.Client.Delete(ctx, claim)).To(Succeed())
	g.Eventually(func() bool { return follower.Ended(claim.UID) }).WithTimeout(wait).Should(BeFalse())
}
