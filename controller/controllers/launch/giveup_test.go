package launch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/launch"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
)

// stoppedCreating is ReconcileInProgress once the operator stopped working on a group it had
// accepted: False, keeping its reason.
func stoppedCreating() metav1.Condition {
	return metav1.Condition{Type: ngv1.ConditionReconcileInProgress, Status: metav1.ConditionFalse, Reason: ngv1.ReasonCreating}
}

// freshClock starts the fake clock at the apiserver's time (which stamps creations), and puts it
// back there afterwards: a clock left hours ahead would give up the next test's launches.
func freshClock(t *testing.T) {
	t.Helper()
	clk.SetTime(time.Now())
	t.Cleanup(func() { clk.SetTime(time.Now()) })
}

// stepToAge moves the fake clock so that the group is exactly age old.
func stepToAge(group *ngv1.NodeGroup, age time.Duration) {
	clk.Step(age - clk.Since(group.CreationTimestamp.Time))
}

// setStatusNodeCount plays the operator counting a node in the group's status.
func setStatusNodeCount(g Gomega, group *ngv1.NodeGroup, n int32) {
	ctx := context.Background()
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(group), group)).To(Succeed())
	group.Status.NodeCount = n
	g.Expect(env.Client.Status().Update(ctx, group)).To(Succeed())
	inCache(g, group)
}

// joinNode plays a node joining the cluster, as CKE names and labels it (labelled false: a
// node found by its name only).
func joinNode(t *testing.T, g Gomega, name, group string, labelled bool) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if labelled {
		node.Labels = map[string]string{ngv1.LabelNodeGroup: group}
	}
	g.Expect(env.Client.Create(ctx, node)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, node) })
}

// alive says the claim exists and is not being deleted.
func alive(g Gomega, claim *karpv1.NodeClaim) {
	current := &karpv1.NodeClaim{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(claim), current)).To(Succeed())
	g.Expect(current.DeletionTimestamp).To(BeNil())
	g.Expect(current.UID).To(Equal(claim.UID))
}

// A launch whose group has no node is given up at its give-up time, not a second before: its
// claim is deleted (core then deletes the group and plans again), with an event and a metric
// saying why. Sooner when the operator stopped working on the group; status.nodeCount does not
// count as a node.
func TestALaunchWithNoNodeIsGivenUpAtItsTime(t *testing.T) {
	for _, tc := range []struct {
		name            string
		phase           string
		conds           []metav1.Condition
		statusNodeCount int32
		after           time.Duration
		rule, reason    string
	}{
		{"still Creating", ngv1.PhaseCreating, []metav1.Condition{creating()}, 0, giveUpAfter, launch.RuleNoNode, "Launched"},
		{"counted by the operator, never joined", ngv1.PhaseCreating, []metav1.Condition{creating()}, 1, giveUpAfter, launch.RuleNoNode, "Launched"},
		{"retrying an UpstreamError", ngv1.PhaseUpstreamError,
			[]metav1.Condition{creating(), failed(ngv1.ReasonUpstreamError, "API error: RequestDidntReturnSuccess")}, 0, giveUpAfter, launch.RuleNoNode, ngv1.ReasonUpstreamError},
		{"retrying an UpstreamError, in progress False", ngv1.PhaseUpstreamError,
			[]metav1.Condition{stoppedCreating(), failed(ngv1.ReasonUpstreamError, "API error: RequestDidntReturnSuccess")}, 0, giveUpAfter, launch.RuleNoNode, ngv1.ReasonUpstreamError},
		{"an unknown failure while still in progress", "Failed",
			[]metav1.Condition{creating(), failed("VMBootFailed", "boot timed out, retrying")}, 0, giveUpAfter, launch.RuleNoNode, "VMBootFailed"},
		{"no status from the operator", "", nil, 0, giveUpAfter, launch.RuleNoNode, "Pending"},
		{"Synced with no node", ngv1.PhaseSynced, []metav1.Condition{synced()}, 0, giveUpAfter, launch.RuleNoNode, "Synced"},
		{"the operator stopped on an unknown failure", "Failed",
			[]metav1.Condition{stoppedCreating(), failed("VMBootFailed", "boot timed out")}, 0, stoppedGiveUpAfter, launch.RuleOperatorStopped, "VMBootFailed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			freshClock(t)
			claim, group := newLaunch(t, g, "S", tc.phase, tc.conds...)
			if tc.statusNodeCount > 0 {
				setStatusNodeCount(g, group, tc.statusNodeCount)
			}
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(claim)}
			givenUp := launch.LaunchesGivenUp.WithLabelValues(tc.rule, tc.reason)
			before := value(givenUp)

			// A second early: still followed, and the follower asks to be woken at the time.
			stepToAge(group, tc.after-time.Second)
			res, err := follower.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.RequeueAfter).To(Equal(time.Second))
			alive(g, claim)
			g.Expect(value(givenUp)).To(Equal(before))
			g.Expect(seen.about(group.Name)).NotTo(ContainElement(ContainSubstring(launch.ReasonLaunchGivenUp)))

			clk.Step(time.Second)
			_, err = follower.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(gone(claim)).WithTimeout(wait).Should(BeTrue(), "the claim of a launch given up is deleted")
			// The manager's own reconcile may have won the race to the delete: its bookkeeping
			// follows the delete.
			g.Eventually(func() float64 { return value(givenUp) }).WithTimeout(wait).Should(Equal(before + 1))
			g.Eventually(func() []string { return seen.about(group.Name) }).WithTimeout(wait).Should(ContainElement(
				SatisfyAll(ContainSubstring(launch.ReasonLaunchGivenUp), ContainSubstring("has no node"))))
			g.Eventually(follower.Overdue).WithTimeout(wait).Should(Equal(0), "a launch given up is no longer reported overdue")
			g.Expect(value(givenUp)).To(Equal(before+1), "given up once")
		})
	}
}

// A group with a node that joined is never given up, however long it stays short of Synced and
// whatever the operator reports: the node may run pods. It stays reported overdue.
func TestALaunchWithANodeIsNeverGivenUp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		phase    string
		conds    []metav1.Condition
		node     func(group string) string
		labelled bool
	}{
		{"node0 joined while Creating", ngv1.PhaseCreating, []metav1.Condition{creating()},
			func(g string) string { return ngv1.NodeName(g, 0) }, true},
		{"an UpstreamError, node0 found by name", ngv1.PhaseUpstreamError,
			[]metav1.Condition{creating(), failed(ngv1.ReasonUpstreamError, "API error: RequestDidntReturnSuccess")},
			func(g string) string { return ngv1.NodeName(g, 0) }, false},
		{"the operator stopped, a node found by its label", "Failed",
			[]metav1.Condition{stoppedCreating(), failed("VMBootFailed", "boot timed out")},
			func(g string) string { return ngv1.NodeName(g, 1) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			freshClock(t)
			claim, group := newLaunch(t, g, "S", tc.phase, tc.conds...)
			joinNode(t, g, tc.node(group.Name), group.Name, tc.labelled)
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(claim)}

			// The operator has not counted it: the Node object decides, not status.nodeCount.
			stepToAge(group, giveUpAfter+time.Hour)
			_, err := follower.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(func() []string { return seen.about(group.Name) }).WithTimeout(wait).Should(
				ContainElement(ContainSubstring(launch.ReasonSyncOverdue)), "still reported overdue")
			// Earlier tests' launches are forgotten once their deletion is seen.
			g.Eventually(follower.Overdue).WithTimeout(wait).Should(Equal(1))
			alive(g, claim)
			g.Expect(seen.about(group.Name)).NotTo(ContainElement(ContainSubstring(launch.ReasonLaunchGivenUp)))
		})
	}
}

// The give-up deletes only through the ownership proof: a group that names another claim UID,
// or that is not labelled after its claim, is not touched, and neither is a claim that
// registers while the follower decides. The manager's reconciles are held off the claim while
// the test's own Reconcile plays each case, so that the hooks fire on that call's reads.
func TestAGiveUpNeedsTheOwnershipProof(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alter func(g Gomega, claim *karpv1.NodeClaim, group *ngv1.NodeGroup)
	}{
		{"the group names another claim UID", func(g Gomega, _ *karpv1.NodeClaim, group *ngv1.NodeGroup) {
			patch := client.MergeFrom(group.DeepCopy())
			group.Annotations[v1alpha1.AnnotationNodeClaimUID] = "00000000-0000-0000-0000-000000000000"
			g.Expect(env.Client.Patch(context.Background(), group, patch)).To(Succeed())
		}},
		{"the group is not labelled after its claim", func(g Gomega, _ *karpv1.NodeClaim, group *ngv1.NodeGroup) {
			patch := client.MergeFrom(group.DeepCopy())
			group.Labels[v1alpha1.LabelNodeClaim] = "someone-else"
			g.Expect(env.Client.Patch(context.Background(), group, patch)).To(Succeed())
		}},
		{"the claim registers between the follower's cached read and the proof's", func(g Gomega, claim *karpv1.NodeClaim, _ *ngv1.NodeGroup) {
			// The follower decided on a claim not registered; the proof's uncached read finds
			// it registered, and its resourceVersion is current, so the preconditions alone
			// would not stop the delete.
			cacheHooks.set(claim.Name, func() { setClaimCondition(g, claim.DeepCopy(), karpv1.ConditionTypeRegistered) })
		}},
		{"the claim registers between the proof's read and the delete", func(g Gomega, claim *karpv1.NodeClaim, _ *ngv1.NodeGroup) {
			// The claim registers right after the ownership proof's uncached read, so only the
			// delete's resourceVersion precondition stands in the way.
			hooks.set(claim.Name, func() { setClaimCondition(g, claim.DeepCopy(), karpv1.ConditionTypeRegistered) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			freshClock(t)
			claim, group := newLaunch(t, g, "S", ngv1.PhaseCreating, creating())
			t.Cleanup(func() { hooks.take(claim.Name); cacheHooks.take(claim.Name) })
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(claim)}
			givenUp := launch.LaunchesGivenUp.WithLabelValues(launch.RuleNoNode, "Launched")
			before := value(givenUp)

			release := holds.hold(claim.Name)
			t.Cleanup(release)
			tc.alter(g, claim, group)
			stepToAge(group, giveUpAfter+time.Minute)
			_, err := follower.Reconcile(own(ctx), req)
			g.Expect(err).NotTo(HaveOccurred())
			release()
			g.Consistently(func(g Gomega) {
				alive(g, claim)
				current := &ngv1.NodeGroup{}
				g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(group), current)).To(Succeed())
				g.Expect(current.DeletionTimestamp).To(BeNil())
			}).WithTimeout(2 * time.Second).Should(Succeed())
			g.Expect(value(givenUp)).To(Equal(before))
			g.Expect(seen.about(group.Name)).NotTo(ContainElement(ContainSubstring(launch.ReasonLaunchGivenUp)))
		})
	}
}

// The shipped defaults give a dead launch up early enough for its pod to run on a replacement
// within 5 minutes of its creation, whatever its group shows, and never before every live node
// had joined: not a second before settings.LaunchGiveUpAfter (StoppedLaunchGiveUpAfter once the
// operator stopped), and at it. The platform's figures are the package documentation's.
func TestTheDefaultsGiveUpADeadLaunchInTimeForItsReplacement(t *testing.T) {
	const (
		joinBound       = 185 * time.Second // cke-platform.md §6: created → node joined, worst live
		replacementPath = 90 * time.Second  // give-up → replacement's pod Running, usual join
		replacedWithin  = 5 * time.Minute
	)
	defaults := settings.Defaults()
	noNode, stopped := defaults.LaunchGiveUpAfter.Duration, defaults.StoppedLaunchGiveUpAfter.Duration
	g := NewWithT(t)
	g.Expect(noNode+replacementPath).To(BeNumerically("<=", replacedWithin), "the replacement's pod runs within 5 minutes")
	g.Expect(stopped).To(BeNumerically(">", joinBound), "no launch given up before every live node had joined")
	g.Expect(stopped).To(BeNumerically("<", noNode), "the stopped operator's time means something")

	for _, tc := range []struct {
		name  string
		phase string
		conds []metav1.Condition
		after time.Duration
	}{
		{"still Creating", ngv1.PhaseCreating, []metav1.Condition{creating()}, noNode},
		{"retrying an UpstreamError", ngv1.PhaseUpstreamError,
			[]metav1.Condition{creating(), failed(ngv1.ReasonUpstreamError, "API error: RequestDidntReturnSuccess")}, noNode},
		{"no status from the operator", "", nil, noNode},
		{"Synced with no node", ngv1.PhaseSynced, []metav1.Condition{synced()}, noNode},
		{"the operator stopped on an unknown failure", "Failed",
			[]metav1.Condition{stoppedCreating(), failed("VMBootFailed", "boot timed out")}, stopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			freshClock(t)
			claim, group := newLaunch(t, g, "S", tc.phase, tc.conds...)
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(claim)}

			stepToAge(group, tc.after-time.Second)
			res, err := shipped.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.RequeueAfter).To(Equal(time.Second), "woken at the give-up time")
			alive(g, claim)

			clk.Step(time.Second)
			_, err = shipped.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(gone(claim)).WithTimeout(wait).Should(BeTrue(), "the claim of a launch given up is deleted")
			g.Eventually(func() []string { return seen.about(group.Name) }).WithTimeout(wait).Should(ContainElement(
				SatisfyAll(ContainSubstring(launch.ReasonLaunchGivenUp), ContainSubstring(fmt.Sprintf("has no node %s after", tc.after)))))
		})
	}
}
