package sim_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
)

// An accepted group: the first write is the decision (Creating), the node joins while the
// group is still Creating, Synced and Ready=True arrive together afterwards.
func TestAcceptedGroupTimeline(t *testing.T) {
	configure(t, func(o *operator.Options) {
		o.DecisionDelay, o.JoinDelay, o.SyncDelayMin, o.SyncDelayMax = 300*time.Millisecond, 1500*time.Millisecond, 3*time.Second, 3*time.Second
	})
	h := record(t, "life")
	start := time.Now()
	g := create(t, withTaints(withLabels(newGroup("life", "XS", 1), map[string]string{"team": "blue"}),
		ngv1.Taint{Key: "dedicated", Value: "blue", Effect: corev1.TaintEffectNoSchedule}))
	got := waitPhase(t, g.Name, ngv1.PhaseSynced)
	if !controllerutil.ContainsFinalizer(got, operator.Finalizer) {
		t.Errorf("no finalizer on accepted group: %v", got.Finalizers)
	}

	writes := h.writes()
	if len(writes) == 0 {
		t.Fatal("no status write seen")
	}
	first := writes[0]
	if d := first.at.Sub(start); d < 300*time.Millisecond {
		t.Errorf("decision after %s, want ≥ the 300ms decision delay", d)
	}
	if first.status.Phase != ngv1.PhaseCreating || len(first.status.Conditions) != 1 ||
		!hasCondition(first.status, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, ngv1.ReasonCreating) {
		t.Errorf("first write = %+v, want phase Creating and only ReconcileInProgress=True(Creating)", first.status)
	}
	if first.status.UpstreamID == "" {
		t.Errorf("no upstreamId at acceptance")
	}
	joined, synced := -1, -1
	for i, w := range writes {
		if joined < 0 && w.status.NodeCount == 1 {
			joined = i
		}
		if w.status.Phase == ngv1.PhaseSynced {
			synced = i
			break
		}
		if w.status.Phase != ngv1.PhaseCreating {
			t.Errorf("write %d before Synced has phase %q", i, w.status.Phase)
		}
	}
	if joined < 0 || synced < 0 || joined >= synced {
		t.Fatalf("node joined at write %d, Synced at write %d: want the join while Creating (writes %+v)", joined, synced, writes)
	}
	s := writes[synced]
	if !hasCondition(s.status, ngv1.ConditionReady, metav1.ConditionTrue, ngv1.ReasonSynced) ||
		!hasCondition(s.status, ngv1.ConditionReconcileInProgress, metav1.ConditionFalse, ngv1.ReasonSynced) ||
		!hasCondition(s.status, ngv1.ConditionReconcileFailed, metav1.ConditionFalse, ngv1.ReasonSynced) {
		t.Errorf("Synced write = %+v, want Ready=True, ReconcileInProgress=False, ReconcileFailed=False together", s.status)
	}
	if d := s.at.Sub(start); d < 3*time.Second {
		t.Errorf("Synced after %s, want ≥ the 3s sync delay", d)
	}
	if s.status.Labels["team"] != "blue" || len(s.status.Taints) != 1 || s.status.TargetNodeCount != 1 {
		t.Errorf("Synced status labels %v taints %v target %d", s.status.Labels, s.status.Taints, s.status.TargetNodeCount)
	}

	n := waitNodeReady(t, "life-node0")
	for k, v := range map[string]string{
		ngv1.LabelNodeGroup: "life", ngv1.LabelFlavor: "XS", ngv1.LabelClusterNodeRole: ngv1.NodeRoleWorker,
		"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": "life-node0",
		"node.kubernetes.io/instance-type": "XS", "team": "blue",
	} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	for _, k := range []string{corev1.LabelTopologyRegion, corev1.LabelTopologyZone} {
		if v, ok := n.Labels[k]; ok {
			t.Errorf("label %s=%s: CKE does not stamp topology labels", k, v)
		}
	}
	// The controller-manager may still carry its not-ready taint from before kwok's first
	// heartbeat; only the group's own taint matters here.
	var own []corev1.Taint
	for _, taint := range n.Spec.Taints {
		if !strings.HasPrefix(taint.Key, "node.kubernetes.io/") {
			own = append(own, taint)
		}
	}
	if len(own) != 1 || own[0].Key != "dedicated" || own[0].Value != "blue" || own[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taints = %+v", n.Spec.Taints)
	}
	if n.Spec.ProviderID != "" {
		t.Errorf("providerID = %q, CKE leaves it empty", n.Spec.ProviderID)
	}
	for res, want := range map[corev1.ResourceName]string{"cpu": "6", "memory": "7553664Ki", "ephemeral-storage": "40971488Ki", "pods": "110"} {
		if q := n.Status.Capacity[res]; q.String() != want {
			t.Errorf("capacity %s = %s, want %s", res, q.String(), want)
		}
	}
	for res, want := range map[corev1.ResourceName]string{"cpu": "6", "memory": "7451264Ki", "ephemeral-storage": "36874339Ki", "pods": "110"} {
		if q := n.Status.Allocatable[res]; q.String() != want {
			t.Errorf("allocatable %s = %s, want %s", res, q.String(), want)
		}
	}
	if n.Status.NodeInfo.KubeletVersion != "v1.37.0" {
		t.Errorf("kubelet %s, CKE runs 1.37.0", n.Status.NodeInfo.KubeletVersion)
	}
}

// Sync delays are drawn per group within the range, reproducibly.
func TestSyncDelayDrawnInRange(t *testing.T) {
	configure(t, func(o *operator.Options) {
		o.DecisionDelay, o.JoinDelay, o.SyncDelayMin, o.SyncDelayMax = 0, 500*time.Millisecond, 2*time.Second, 4*time.Second
	})
	start := time.Now()
	create(t, newGroup("draw", "2XS", 0))
	waitPhase(t, "draw", ngv1.PhaseSynced)
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("Synced after %s, want within 2–4 s", d)
	}
}

func TestStampTopologyLabels(t *testing.T) {
	configure(t, func(o *operator.Options) { o.StampTopologyLabels = true })
	create(t, newGroup("topo", "2XS", 1))
	n := waitNodeReady(t, "topo-node0")
	if n.Labels[corev1.LabelTopologyRegion] != "par" || n.Labels[corev1.LabelTopologyZone] != "par" {
		t.Errorf("labels %v, want region and zone par", n.Labels)
	}
}

// Deletion, in the platform's order: Terminating at once; TeardownDelay later the VM is gone
// (Node NotReady, its kubelet stopped) and the Node object is deleted; the group goes once
// the Node object is gone. A Karpenter finalizer on the Node holds the group until Karpenter
// lets go, which it does for a NotReady Node whose instance the provider reports gone.
func TestDeletionOrder(t *testing.T) {
	configure(t, func(o *operator.Options) { o.TeardownDelay = 2 * time.Second })
	ctx := context.Background()
	g := create(t, newGroup("del", "2XS", 1))
	waitPhase(t, g.Name, ngv1.PhaseSynced)
	n := waitNodeReady(t, "del-node0")
	const held = "karpenter.sh/termination"
	patchNodeFinalizers(t, n.Name, []string{held})
	deleted := time.Now()
	if err := k8s.Delete(ctx, get(t, g.Name)); err != nil {
		t.Fatalf("deleting NodeGroup: %v", err)
	}
	eventually(t, 5*time.Second, func() error {
		if c := condition(get(t, g.Name), ngv1.ConditionTerminating); c.Status != "True" {
			return fmt.Errorf("Terminating condition %+v", c)
		}
		return nil
	})
	// Until the teardown the VM runs: Node Ready and not deleted.
	consistently(t, time.Until(deleted.Add(1500*time.Millisecond)), func() error {
		n, err := getNode("del-node0")
		if err != nil {
			return err
		}
		if !n.DeletionTimestamp.IsZero() || !nodeReadyTrue(n) {
			return fmt.Errorf("node torn down %s after the delete, before the teardown delay", time.Since(deleted))
		}
		return nil
	})
	// Then the VM is gone: NotReady, and the Node object deleted (Karpenter's finalizer holds it).
	eventually(t, 10*time.Second, func() error {
		n, err := getNode("del-node0")
		if err != nil {
			return err
		}
		ready := nodeReadyCondition(n)
		if n.DeletionTimestamp.IsZero() || ready == nil || ready.Status != corev1.ConditionFalse || ready.Reason != operator.NodeShutdownReason {
			return fmt.Errorf("node deleting %v, Ready %+v", !n.DeletionTimestamp.IsZero(), ready)
		}
		return nil
	})
	if d := time.Since(deleted); d < 2*time.Second {
		t.Errorf("VM torn down %s after the delete, want ≥ the 2s teardown delay", d)
	}
	consistently(t, time.Second, func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Name: g.Name}, &ngv1.NodeGroup{}); err != nil {
			return fmt.Errorf("NodeGroup went before its Node: %v", err)
		}
		return nil
	})
	// Karpenter core's node termination: a NotReady Node whose instance the provider reports
	// gone (a terminating group reads as gone) loses its finalizer.
	cur, err := getNode("del-node0")
	if err != nil {
		t.Fatal(err)
	}
	if !nodeReadyTrue(cur) && !get(t, g.Name).DeletionTimestamp.IsZero() {
		patchNodeFinalizers(t, cur.Name, nil)
	}
	waitNodeGone(t, "del-node0")
	eventually(t, 10*time.Second, func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Name: g.Name}, &ngv1.NodeGroup{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NodeGroup still there (%v)", err)
		}
		return nil
	})
}

// A Node still held once its VM is torn down stays NotReady: its kubelet is gone, so nothing
// reports it Ready again (the status post kwok had scheduled used to, 20–45 s later) and
// nothing renews its Lease; the node lifecycle controller marks it Unknown after its grace
// period, as on the platform.
func TestTornDownNodeStaysDown(t *testing.T) {
	ctx := context.Background()
	g := create(t, newGroup("torn", "2XS", 1))
	waitPhase(t, g.Name, ngv1.PhaseSynced)
	n := waitNodeReady(t, "torn-node0")
	patchNodeFinalizers(t, n.Name, []string{"karpenter.sh/termination"})
	t.Cleanup(func() { patchNodeFinalizers(t, n.Name, nil) })
	if err := k8s.Delete(ctx, get(t, g.Name)); err != nil {
		t.Fatalf("deleting NodeGroup: %v", err)
	}
	eventually(t, 10*time.Second, func() error {
		n, err := getNode("torn-node0")
		if err != nil {
			return err
		}
		if ready := nodeReadyCondition(n); ready == nil || ready.Status != corev1.ConditionFalse || ready.Reason != operator.NodeShutdownReason {
			return fmt.Errorf("Ready %+v, want False reason %s", ready, operator.NodeShutdownReason)
		}
		return nil
	})
	tornDown := time.Now()
	var readyAgain []string
	eventually(t, sim.NodeMonitorGracePeriod+sim.NodeMonitorPeriod+15*time.Second, func() error {
		n, err := getNode("torn-node0")
		if err != nil {
			return err
		}
		ready := nodeReadyCondition(n)
		switch {
		case ready == nil:
			return errors.New("no Ready condition")
		case ready.Status == corev1.ConditionTrue:
			readyAgain = append(readyAgain, fmt.Sprintf("%s after the teardown", time.Since(tornDown).Round(100*time.Millisecond)))
		case ready.Status == corev1.ConditionUnknown && ready.Reason == "NodeStatusUnknown":
			return nil
		}
		// The grace period runs from the last renewal the lifecycle controller saw: say when it was.
		renewal := "no Lease renewal readable"
		if renewed, err := leaseRenewal(ctx, "torn-node0"); err == nil {
			renewal = fmt.Sprintf("Lease last renewed %s after the teardown", renewed.Sub(tornDown).Round(100*time.Millisecond))
		}
		return fmt.Errorf("Ready %s (%s) %s after the teardown, want Unknown; %s", ready.Status, ready.Reason, time.Since(tornDown).Round(time.Second), renewal)
	})
	if len(readyAgain) > 0 {
		t.Errorf("the torn-down node was Ready again: %v", readyAgain)
	}
	// The teardown's own write may land just after; every renewal is 10 s apart.
	if renewed, err := leaseRenewal(ctx, "torn-node0"); err != nil {
		t.Error(err)
	} else if renewed.After(tornDown.Add(2 * time.Second)) {
		t.Errorf("Lease renewed %s after the teardown", renewed.Sub(tornDown))
	}
}

func TestOutOfBandResize(t *testing.T) {
	ctx := context.Background()
	g := create(t, withLabels(newGroup("resize", "2XS", 1), map[string]string{"team": "red"}))
	waitPhase(t, g.Name, ngv1.PhaseSynced)
	waitNodeReady(t, "resize-node0")

	scale := func(n int32) {
		t.Helper()
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
		// The scale subresource answers with a Scale, so the patch targets a throwaway copy.
		if err := k8s.SubResource("scale").Patch(ctx, get(t, g.Name), patch); err != nil {
			t.Fatalf("scaling to %d: %v", n, err)
		}
	}
	h := record(t, g.Name)
	scale(3)
	waitNodeReady(t, "resize-node1")
	n2 := waitNodeReady(t, "resize-node2")
	if n2.Labels["team"] != "red" {
		t.Errorf("resized node labels %v, want the group's spec.labels", n2.Labels)
	}
	got := waitPhase(t, g.Name, ngv1.PhaseSynced)
	if got.Status.NodeCount != 3 || got.Status.TargetNodeCount != 3 {
		t.Errorf("status nodeCount %d target %d", got.Status.NodeCount, got.Status.TargetNodeCount)
	}
	scaling := false
	for _, w := range h.writes() {
		if w.status.Phase == ngv1.PhaseScaling && hasCondition(w.status, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, ngv1.ReasonScaling) &&
			hasCondition(w.status, ngv1.ConditionReady, metav1.ConditionTrue, ngv1.ReasonSynced) {
			scaling = true
		}
	}
	if !scaling {
		t.Errorf("no Scaling write (ReconcileInProgress=True reason Scaling, Ready kept) seen: %+v", h.writes())
	}
	scale(1)
	waitNodeGone(t, "resize-node2")
	waitNodeGone(t, "resize-node1")
	if _, err := getNode("resize-node0"); err != nil {
		t.Errorf("node0 should stay: %v", err)
	}
	waitPhase(t, g.Name, ngv1.PhaseSynced)
	// Beyond the quota (16/24 + 5 × 2XS = 36/44): refused, nodes kept.
	scale(5)
	got = waitPhase(t, g.Name, ngv1.PhaseQuotaExceeded)
	if c := condition(got, ngv1.ConditionReconcileFailed); c.Status != "True" || c.Message != "" {
		t.Errorf("ReconcileFailed = %+v", c)
	}
	if _, err := getNode("resize-node0"); err != nil {
		t.Errorf("node0 should stay: %v", err)
	}
	scale(2)
	waitPhase(t, g.Name, ngv1.PhaseSynced)
	waitNodeReady(t, "resize-node1")
}

func patchNodeFinalizers(t *testing.T, name string, finalizers []string) {
	t.Helper()
	n, err := getNode(name)
	if err != nil {
		t.Fatalf("reading node %q: %v", name, err)
	}
	before := n.DeepCopy()
	n.Finalizers = finalizers
	if err := k8s.Patch(context.Background(), n, client.MergeFrom(before)); err != nil {
		t.Fatalf("setting finalizers of node %q: %v", name, err)
	}
}
