package quotausage_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotausage"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

func group(name, flavor string, status ngv1.NodeGroupStatus, deleting bool) *ngv1.NodeGroup {
	g := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ngv1.NodeGroupSpec{Flavor: flavor, NodeCount: 1}, Status: status}
	if deleting {
		g.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		g.Finalizers = []string{"api.clever-cloud.com/finalizer"} // the operator's, held while it tears down
	}
	return g
}

func condition(typ, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.Now()}
}

func TestCountChargesWhatTheQuotaHoldsAndProvesWhatWasAccepted(t *testing.T) {
	g := NewWithT(t)
	cat, err := catalog.Load("", "par", logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	refused := ngv1.NodeGroupStatus{Phase: ngv1.PhaseQuotaExceeded, Conditions: []metav1.Condition{condition(ngv1.ConditionReconcileFailed, ngv1.ReasonQuotaExceeded)}}
	creating := ngv1.NodeGroupStatus{Phase: ngv1.PhaseCreating, Conditions: []metav1.Condition{condition(ngv1.ConditionReconcileInProgress, ngv1.ReasonCreating)}}
	synced := ngv1.NodeGroupStatus{Phase: ngv1.PhaseSynced, Conditions: []metav1.Condition{condition(ngv1.ConditionReady, ngv1.ReasonSynced)}}
	cp := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane, ngv1.LabelFlavor: "S"}}}
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		cp("cp-0"), cp("cp-1"),
		group("refused", "XL", refused, false),
		// The refused group the provider deletes: the operator's finalizer keeps it a few
		// seconds, still refused. It holds nothing (counting it made the headroom read -16 GB).
		group("refused-deleting", "XL", refused, true),
		group("pending", "2XS", ngv1.NodeGroupStatus{}, false),
		group("creating", "M", creating, false),
		group("synced", "XS", synced, false),
		group("synced-deleting", "XS", synced, true),
	).Build()

	o, err := quotausage.Count(context.Background(), client.Client(kube), cat)
	g.Expect(err).NotTo(HaveOccurred())
	// Control plane 16 / 24; pending 2XS 4 / 4; creating M 10 / 16; two XS 12 / 16.
	g.Expect(o.Usage).To(Equal(quota.Usage{CPU: 42, GB: 60}))
	g.Expect(o.Proven).To(Equal(quota.Usage{CPU: 38, GB: 56}), "the pending group is not proven")
	g.Expect(o.Groups).To(Equal(map[string]quota.Group{
		"refused":          {State: quota.GroupUncharged, Size: quota.Usage{CPU: 16, GB: 32}},
		"refused-deleting": {State: quota.GroupUncharged, Size: quota.Usage{CPU: 16, GB: 32}, Deleting: true},
		"pending":          {State: quota.GroupCharged, Size: quota.Usage{CPU: 4, GB: 4}},
		"creating":         {State: quota.GroupCreating, Size: quota.Usage{CPU: 10, GB: 16}},
		"synced":           {State: quota.GroupBuilt, Size: quota.Usage{CPU: 6, GB: 8}},
		"synced-deleting":  {State: quota.GroupBuilt, Size: quota.Usage{CPU: 6, GB: 8}, Deleting: true},
	}))
}

func TestQuotaUsageCountsControlPlaneAndEveryLiveGroup(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	before := func() quota.Usage { h, _ := tracker.Headroom(); return h }()

	cp := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("control-plane"), Labels: map[string]string{
		ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane, ngv1.LabelFlavor: "S"}}}
	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())
	pool := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("pool")}, Spec: ngv1.NodeGroupSpec{Flavor: "XS", NodeCount: 2}}
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
	refused := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("refused")}, Spec: ngv1.NodeGroupSpec{Flavor: "XL", NodeCount: 1}}
	g.Expect(env.Client.Create(ctx, refused)).To(Succeed())
	refused.Status.Phase = ngv1.PhaseQuotaExceeded
	g.Expect(env.Client.Status().Update(ctx, refused)).To(Succeed())

	// S (8 vCPU / 12 GB) + 2 × XS (6 / 8): 20 vCPU / 28 GB more; the refused XL holds nothing.
	g.Eventually(func() quota.Usage { h, _ := tracker.Headroom(); return h }).WithTimeout(testenv.Wait).
		Should(Equal(quota.Usage{CPU: before.CPU - 20, GB: before.GB - 28}))
}

// A group the engine accepted and built holds its node when a resize out of band (nodeCount
// 1 → 2) is refused: the quota engine still charges the node it granted, so it counts, as built
// use. A group refused at creation holds nothing, whatever its spec says.
func TestARefusedResizeStillChargesTheRunningNode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	before := func() quota.Usage { h, _ := tracker.Headroom(); return h }()

	resized := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("resized")}, Spec: ngv1.NodeGroupSpec{Flavor: "2XS", NodeCount: 1}}
	g.Expect(env.Client.Create(ctx, resized)).To(Succeed())
	resized.Status = ngv1.NodeGroupStatus{Phase: ngv1.PhaseSynced, NodeCount: 1, TargetNodeCount: 1,
		Conditions: []metav1.Condition{condition(ngv1.ConditionReady, ngv1.ReasonSynced)}}
	g.Expect(env.Client.Status().Update(ctx, resized)).To(Succeed())
	neverAccepted := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("refused")}, Spec: ngv1.NodeGroupSpec{Flavor: "XS", NodeCount: 2}}
	g.Expect(env.Client.Create(ctx, neverAccepted)).To(Succeed())
	neverAccepted.Status = ngv1.NodeGroupStatus{Phase: ngv1.PhaseQuotaExceeded,
		Conditions: []metav1.Condition{condition(ngv1.ConditionReconcileFailed, ngv1.ReasonQuotaExceeded)}}
	g.Expect(env.Client.Status().Update(ctx, neverAccepted)).To(Succeed())
	t.Cleanup(func() {
		for _, o := range []*ngv1.NodeGroup{resized, neverAccepted} {
			_ = env.Client.Delete(context.Background(), o)
		}
	})
	// One 2XS: 4 vCPU / 4 GB.
	g.Eventually(func() quota.Usage { h, _ := tracker.Headroom(); return h }).WithTimeout(testenv.Wait).
		Should(Equal(quota.Usage{CPU: before.CPU - 4, GB: before.GB - 4}))

	// Someone resizes it by hand; the engine refuses the second node. The first still runs.
	resized.Spec.NodeCount = 2
	g.Expect(env.Client.Update(ctx, resized)).To(Succeed())
	resized.Status.Phase = ngv1.PhaseQuotaExceeded
	resized.Status.Conditions = append(resized.Status.Conditions,
		condition(ngv1.ConditionReconcileInProgress, ngv1.ReasonScaling),
		condition(ngv1.ConditionReconcileFailed, ngv1.ReasonQuotaExceeded))
	g.Expect(env.Client.Status().Update(ctx, resized)).To(Succeed())

	cat, err := catalog.Load("", "par", logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		o, err := quotausage.Count(ctx, env.Client, cat)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(o.Groups).To(HaveKeyWithValue(resized.Name, quota.Group{State: quota.GroupBuilt, Size: quota.Usage{CPU: 4, GB: 4}}),
			"the node it runs, not the two it asks for, and not nothing")
		g.Expect(o.Groups).To(HaveKeyWithValue(neverAccepted.Name, HaveField("State", quota.GroupUncharged)))
	}).WithTimeout(testenv.Wait).Should(Succeed())
	// A group created after the refusal: once the tracker counts it, its recount has seen the
	// refusal too, and still charges the running node.
	marker := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("marker")}, Spec: ngv1.NodeGroupSpec{Flavor: "2XS", NodeCount: 1}}
	g.Expect(env.Client.Create(ctx, marker)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), marker) })
	g.Eventually(func() quota.Usage { h, _ := tracker.Headroom(); return h }).WithTimeout(testenv.Wait).
		Should(Equal(quota.Usage{CPU: before.CPU - 8, GB: before.GB - 8}))
}

func TestARefusedGroupChargesTheNodesItRunsOnly(t *testing.T) {
	g := NewWithT(t)
	cat, err := catalog.Load("", "par", logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	refusal := func(extra ...metav1.Condition) []metav1.Condition {
		return append([]metav1.Condition{condition(ngv1.ConditionReconcileFailed, ngv1.ReasonQuotaExceeded)}, extra...)
	}
	ready := condition(ngv1.ConditionReady, ngv1.ReasonSynced)
	resized := func(name string, nodes int32, s ngv1.NodeGroupStatus) *ngv1.NodeGroup {
		gr := group(name, "XS", s, false)
		gr.Spec.NodeCount = nodes
		return gr
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		// Built with one node, resized to 3 by hand, refused: one XS runs.
		resized("built", 3, ngv1.NodeGroupStatus{Phase: ngv1.PhaseQuotaExceeded, NodeCount: 1, TargetNodeCount: 1, Conditions: refusal(ready)}),
		// A pool of two, resized to 4, refused: two run.
		resized("pool", 4, ngv1.NodeGroupStatus{Phase: ngv1.PhaseQuotaExceeded, NodeCount: 2, TargetNodeCount: 2, Conditions: refusal(ready)}),
		// Built, but the status counts no node: the one it was built with.
		resized("uncounted", 2, ngv1.NodeGroupStatus{Phase: ngv1.PhaseQuotaExceeded, Conditions: refusal(ready)}),
		// A node joined before the synced write; the refusal came with it.
		resized("joined", 2, ngv1.NodeGroupStatus{Phase: ngv1.PhaseQuotaExceeded, NodeCount: 1, Conditions: refusal()}),
		// Refused while it was being created, before any node: it holds nothing, whatever
		// count it was created with.
		resized("late", 1, ngv1.NodeGroupStatus{Phase: ngv1.PhaseQuotaExceeded, TargetNodeCount: 1,
			Conditions: refusal(condition(ngv1.ConditionReconcileInProgress, ngv1.ReasonCreating))}),
		resized("refused", 2, ngv1.NodeGroupStatus{Phase: ngv1.PhaseQuotaExceeded, Conditions: refusal()}),
	).Build()

	o, err := quotausage.Count(context.Background(), client.Client(kube), cat)
	g.Expect(err).NotTo(HaveOccurred())
	xs := quota.Usage{CPU: 6, GB: 8}
	g.Expect(o.Groups).To(Equal(map[string]quota.Group{
		"built":     {State: quota.GroupBuilt, Size: xs},
		"pool":      {State: quota.GroupBuilt, Size: xs.Times(2)},
		"uncounted": {State: quota.GroupBuilt, Size: xs},
		"joined":    {State: quota.GroupBuilt, Size: xs},
		"late":      {State: quota.GroupUncharged, Size: xs},
		"refused":   {State: quota.GroupUncharged, Size: xs.Times(2)},
	}))
	g.Expect(o.Usage).To(Equal(xs.Times(5)))
	g.Expect(o.Proven).To(Equal(xs.Times(5)), "what runs was accepted")
}
