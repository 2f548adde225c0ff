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
