package sim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
)

const reservedPrefixMessage = "Label keys with reserved prefixes (kubernetes.io/, node.kubernetes.io/, clever-cloud.com/) are not allowed"

// The served CRD is the platform's, field by field.
func TestCRDIsThePlatforms(t *testing.T) {
	ctx := context.Background()
	invalid := map[string]struct {
		g       *ngv1.NodeGroup
		message string
	}{
		"nodeCount above 16":       {newGroup("v-17", "S", 17), "spec.nodeCount"},
		"negative nodeCount":       {newGroup("v-neg", "S", -1), "spec.nodeCount"},
		"lowercase flavor":         {newGroup("v-lower", "s", 0), `Unsupported value: "s"`},
		"kubernetes.io/ label":     {withLabels(newGroup("v-k8s", "S", 0), map[string]string{"kubernetes.io/role": "x"}), reservedPrefixMessage},
		"node.kubernetes.io/label": {withLabels(newGroup("v-node", "S", 0), map[string]string{"node.kubernetes.io/x": "y"}), reservedPrefixMessage},
		"clever-cloud.com/ label":  {withLabels(newGroup("v-cc", "S", 0), map[string]string{"clever-cloud.com/flavor": "S"}), reservedPrefixMessage},
		"label value with space":   {withLabels(newGroup("v-space", "S", 0), map[string]string{"team": "a b"}), "spec.labels.team"},
		"label value of 64":        {withLabels(newGroup("v-long", "S", 0), map[string]string{"team": strings.Repeat("a", 64)}), "spec.labels.team"},
		"bad taint effect":         {withTaints(newGroup("v-effect", "S", 0), ngv1.Taint{Key: "k", Effect: "Sometimes"}), "spec.taints[0].effect"},
		"bad taint key":            {withTaints(newGroup("v-tkey", "S", 0), ngv1.Taint{Key: "-k", Effect: corev1.TaintEffectNoSchedule}), "spec.taints[0].key"},
		"bad taint value":          {withTaints(newGroup("v-tval", "S", 0), ngv1.Taint{Key: "k", Value: "a b", Effect: corev1.TaintEffectNoSchedule}), "spec.taints[0].value"},
	}
	for name, c := range invalid {
		err := k8s.Create(ctx, c.g)
		if err == nil {
			deleteAndWait(t, c.g.Name)
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.message) {
			t.Errorf("%s: want Invalid naming %q, got %v", name, c.message, err)
		}
	}

	// A flavor outside the enum: 422 naming the supported values, as the platform answers.
	err := k8s.Create(ctx, newGroup("v-2xl", "2XL", 1))
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != http.StatusUnprocessableEntity ||
		!strings.Contains(err.Error(), `spec.flavor: Unsupported value: "2XL": supported values: "2XS", "XS", "S", "M", "L", "XL"`) {
		t.Errorf("2XL flavor: want 422 naming the supported values, got %v", err)
	}
	if err == nil {
		deleteAndWait(t, "v-2xl")
	}

	// No key-format rule on labels: only the reserved prefixes are refused.
	create(t, withLabels(newGroup("v-anykey", "S", 0), map[string]string{"-odd": "x"}))

	// The object requires spec, but an empty spec is valid: flavor M, nodeCount 0. (The Go
	// type always sends flavor, so this goes unstructured.)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ngv1.GroupVersion.String(), "kind": "NodeGroup",
		"metadata": map[string]any{"name": "v-empty"}, "spec": map[string]any{},
	}}
	if err := k8s.Create(ctx, u); err != nil {
		t.Fatalf("empty spec: %v", err)
	}
	t.Cleanup(func() { deleteAndWait(t, "v-empty") })
	if g := get(t, "v-empty"); g.Spec.Flavor != "M" || g.Spec.NodeCount != 0 {
		t.Errorf("empty spec defaulted to %+v, want flavor M, nodeCount 0", g.Spec)
	}
	nospec := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ngv1.GroupVersion.String(), "kind": "NodeGroup", "metadata": map[string]any{"name": "v-nospec"},
	}}
	if err := k8s.Create(ctx, nospec); !apierrors.IsInvalid(err) {
		t.Errorf("no spec: want Invalid, got %v", err)
		if err == nil {
			deleteAndWait(t, "v-nospec")
		}
	}

	// Immutability is self == oldSelf on each field, with the platform's messages.
	g := create(t, withTaints(withLabels(newGroup("v-ok", "S", 0), map[string]string{"team": "a", "example.com/tier": "gold"}),
		ngv1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}))
	for name, c := range map[string]struct {
		mutate  func(*ngv1.NodeGroup)
		message string
	}{
		"flavor change": {func(g *ngv1.NodeGroup) { g.Spec.Flavor = "M" }, "flavor is immutable"},
		"label change":  {func(g *ngv1.NodeGroup) { g.Spec.Labels["team"] = "b" }, "labels are immutable after creation"},
		"taint change":  {func(g *ngv1.NodeGroup) { g.Spec.Taints[0].Value = "y" }, "taints are immutable after creation"},
	} {
		if err := update(t, g.Name, c.mutate); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.message) {
			t.Errorf("%s: want Invalid %q, got %v", name, c.message, err)
		}
	}
	if err := update(t, g.Name, func(g *ngv1.NodeGroup) { g.Spec.NodeCount = 2 }); err != nil {
		t.Errorf("changing nodeCount: %v", err)
	}
	// No presence pinning: what was absent can be added, what was present removed.
	create(t, newGroup("v-bare", "S", 0))
	if err := update(t, "v-bare", func(g *ngv1.NodeGroup) {
		g.Spec.Taints = []ngv1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
	}); err != nil {
		t.Errorf("adding taints to a group created without them: %v", err)
	}
	if err := update(t, "v-bare", func(g *ngv1.NodeGroup) { g.Spec.Labels = map[string]string{"team": "a"} }); err != nil {
		t.Errorf("adding labels to a group created without them: %v", err)
	}
	if err := update(t, g.Name, func(g *ngv1.NodeGroup) { g.Spec.Labels = nil }); err != nil {
		t.Errorf("removing labels: %v", err)
	}
}

// update applies mutate to the latest version of a group, retrying on conflicts with the
// operator's own writes.
func update(t *testing.T, name string, mutate func(*ngv1.NodeGroup)) error {
	t.Helper()
	for {
		cur := get(t, name)
		mutate(cur)
		err := k8s.Update(context.Background(), cur)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

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

// A quota refusal is the first write: QuotaExceeded with an empty message, never preceded by
// Creating or ReconcileInProgress.
func TestQuotaRefusal(t *testing.T) {
	// Control plane: 2 × S = 16 vCPU / 24 GB. One M (10 / 16) reaches exactly 40 GB.
	create(t, newGroup("q-m", "M", 1))
	waitPhase(t, "q-m", ngv1.PhaseSynced)
	// One 2XS more (4 / 4) overflows RAM: 44 GB.
	h := record(t, "q-2xs")
	create(t, newGroup("q-2xs", "2XS", 1))
	g := waitPhase(t, "q-2xs", ngv1.PhaseQuotaExceeded)
	if c := condition(g, ngv1.ConditionReconcileFailed); c.Status != "True" || c.Reason != ngv1.ReasonQuotaExceeded || c.Message != "" {
		t.Errorf("ReconcileFailed = %+v, want True, QuotaExceeded, empty message", c)
	}
	consistently(t, time.Second, func() error {
		for _, w := range h.writes() {
			if w.status.Phase != ngv1.PhaseQuotaExceeded || len(w.status.Conditions) != 1 {
				return fmt.Errorf("refused group wrote %+v", w.status)
			}
		}
		if _, err := getNode("q-2xs-node0"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("refused group got a node: %v", err)
		}
		return nil
	})
	waitNodeReady(t, "q-m-node0")
}

// Clusters not upgraded still word the refusal (RAM first, then CPU).
func TestLegacyQuotaMessage(t *testing.T) {
	configure(t, func(o *operator.Options) { o.LegacyQuotaMessage = true })
	create(t, newGroup("lq-big", "M", 2)) // 24 + 32 = 56 GB
	g := waitPhase(t, "lq-big", ngv1.PhaseQuotaExceeded)
	if c := condition(g, ngv1.ConditionReconcileFailed); c.Message != "Quota exceeded: RAM max: limit = 40.0 GB | actual = 56.0 GB" {
		t.Errorf("ReconcileFailed = %+v", c)
	}
	configure(t, func(o *operator.Options) { o.QuotaRAMGB = 1000 })
	// 16 (control plane) + 7 × 4 = 44 vCPU.
	create(t, newGroup("lq-cpu", "2XS", 7))
	g = waitPhase(t, "lq-cpu", ngv1.PhaseQuotaExceeded)
	if c := condition(g, ngv1.ConditionReconcileFailed); c.Message != "Quota exceeded: CPU max: limit = 40 | actual = 44" {
		t.Errorf("ReconcileFailed = %+v", c)
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
// reports it Ready again (the status update kwok had scheduled used to, 20–25 s later) and
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
		return fmt.Errorf("Ready %s (%s) %s after the teardown, want Unknown", ready.Status, ready.Reason, time.Since(tornDown).Round(time.Second))
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

func TestFaultNeverAccept(t *testing.T) {
	g := create(t, withFault(newGroup("f-never", "2XS", 1), operator.FaultNeverAccept))
	eventually(t, 5*time.Second, func() error {
		if !controllerutil.ContainsFinalizer(get(t, g.Name), operator.Finalizer) {
			return errors.New("operator has not seen the group yet")
		}
		return nil
	})
	consistently(t, 2*time.Second, func() error {
		if s := get(t, g.Name).Status; s.Phase != "" || len(s.Conditions) != 0 {
			return fmt.Errorf("never-accept group got a status write: %+v", s)
		}
		return nil
	})
}

func TestFaultVanishAfterAccept(t *testing.T) {
	configure(t, func(o *operator.Options) { o.VanishDelay = time.Second; o.JoinDelay = 5 * time.Second })
	g := create(t, withFault(newGroup("f-vanish", "2XS", 1), operator.FaultVanishAfterAccept))
	waitPhase(t, g.Name, ngv1.PhaseCreating)
	eventually(t, 20*time.Second, func() error {
		err := k8s.Get(context.Background(), client.ObjectKey{Name: g.Name}, &ngv1.NodeGroup{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("group still there (%v)", err)
	})
	if _, err := getNode("f-vanish-node0"); !apierrors.IsNotFound(err) {
		t.Errorf("vanished group left a node: %v", err)
	}
}

func TestFaultNodeNeverReady(t *testing.T) {
	g := create(t, withFault(newGroup("f-notready", "2XS", 1), operator.FaultNodeNeverReady))
	waitPhase(t, g.Name, ngv1.PhaseSynced)
	eventually(t, 10*time.Second, func() error { _, err := getNode("f-notready-node0"); return err })
	consistently(t, 2*time.Second, func() error {
		n, err := getNode("f-notready-node0")
		if err != nil {
			return err
		}
		if nodeReadyTrue(n) {
			return fmt.Errorf("node became Ready")
		}
		return nil
	})
}

func TestFaultSlowBoot(t *testing.T) {
	configure(t, func(o *operator.Options) { o.SlowBootDelay = 4 * time.Second })
	start := time.Now()
	g := create(t, withFault(newGroup("f-slow", "2XS", 1), operator.FaultSlowBoot))
	waitPhase(t, g.Name, ngv1.PhaseCreating)
	eventually(t, 20*time.Second, func() error { _, err := getNode("f-slow-node0"); return err })
	if d := time.Since(start); d < 4*time.Second {
		t.Errorf("slow boot joined %s after creation, want ≥ 4s", d)
	}
	if p := get(t, g.Name).Status.Phase; p != ngv1.PhaseCreating {
		t.Errorf("phase %q when the slow node joined, want Creating (Synced only after the join)", p)
	}
	waitPhase(t, g.Name, ngv1.PhaseSynced)
}

// An upstream error during creation: Creating and UpstreamError together, then recovery.
func TestFaultUpstreamErrorOnCreation(t *testing.T) {
	configure(t, func(o *operator.Options) { o.UpstreamErrorDuration = 2 * time.Second })
	h := record(t, "f-upstream")
	g := create(t, withFault(newGroup("f-upstream", "2XS", 1), operator.FaultUpstreamError))
	got := waitPhase(t, g.Name, ngv1.PhaseUpstreamError)
	if !hasCondition(got.Status, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, ngv1.ReasonCreating) ||
		!hasConditionMessage(got.Status, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, ngv1.ReasonUpstreamError, operator.UpstreamErrorMessage) {
		t.Errorf("status %+v, want ReconcileInProgress=True(Creating) and ReconcileFailed=True(UpstreamError)", got.Status)
	}
	if _, err := getNode("f-upstream-node0"); !apierrors.IsNotFound(err) {
		t.Errorf("node joined during the upstream error: %v", err)
	}
	got = waitPhase(t, g.Name, ngv1.PhaseSynced)
	if c := condition(got, ngv1.ConditionReconcileFailed); c.Status != "False" {
		t.Errorf("ReconcileFailed after recovery %+v", c)
	}
	waitNodeReady(t, "f-upstream-node0")
	if w := h.writes(); len(w) == 0 || w[0].status.Phase != ngv1.PhaseUpstreamError {
		t.Errorf("first write %+v, want the decision already failing", w)
	}
}

// The shape seen live on a scale-up: Ready=True(Synced), ReconcileInProgress=True(Scaling),
// ReconcileFailed=True(UpstreamError), phase UpstreamError.
func TestFaultUpstreamErrorOnScaleUp(t *testing.T) {
	g := create(t, newGroup("f-upscale", "2XS", 1))
	waitPhase(t, g.Name, ngv1.PhaseSynced)
	configure(t, func(o *operator.Options) { o.UpstreamErrorDuration = 2 * time.Second })
	if err := update(t, g.Name, func(g *ngv1.NodeGroup) {
		g.Annotations = map[string]string{operator.FaultAnnotation: string(operator.FaultUpstreamError)}
		g.Spec.NodeCount = 2
	}); err != nil {
		t.Fatal(err)
	}
	got := waitPhase(t, g.Name, ngv1.PhaseUpstreamError)
	if !hasCondition(got.Status, ngv1.ConditionReady, metav1.ConditionTrue, ngv1.ReasonSynced) ||
		!hasCondition(got.Status, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, ngv1.ReasonScaling) ||
		!hasConditionMessage(got.Status, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, ngv1.ReasonUpstreamError, operator.UpstreamErrorMessage) {
		t.Errorf("status %+v, want the live shape", got.Status)
	}
	waitPhase(t, g.Name, ngv1.PhaseSynced)
	waitNodeReady(t, "f-upscale-node1")
}

// A refusal after Creating, with a reason that is neither quota nor upstream error.
func TestFaultLateRefusal(t *testing.T) {
	h := record(t, "f-late")
	g := create(t, withFault(newGroup("f-late", "XS", 1), operator.FaultLateRefusal))
	got := waitPhase(t, g.Name, operator.ReasonProvisioningFailed)
	if c := condition(got, ngv1.ConditionReconcileFailed); c.Status != "True" || c.Reason != operator.ReasonProvisioningFailed || c.Message != fmt.Sprintf(operator.LateRefusalMessage, "XS") {
		t.Errorf("ReconcileFailed = %+v", c)
	}
	if w := h.writes(); len(w) == 0 || w[0].status.Phase != ngv1.PhaseCreating {
		t.Errorf("writes %+v, want Creating first", w)
	}
	consistently(t, 2*time.Second, func() error {
		if _, err := getNode("f-late-node0"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("late-refused group got a node: %v", err)
		}
		return nil
	})
}

func TestFaultNeverSync(t *testing.T) {
	g := create(t, withFault(newGroup("f-nosync", "2XS", 1), operator.FaultNeverSync))
	waitNodeReady(t, "f-nosync-node0")
	consistently(t, 4*time.Second, func() error {
		if p := get(t, g.Name).Status.Phase; p != ngv1.PhaseCreating {
			return fmt.Errorf("never-sync group in phase %q", p)
		}
		return nil
	})
}

func TestFaultNeverSyncNoNode(t *testing.T) {
	g := create(t, withFault(newGroup("f-nonode", "2XS", 1), operator.FaultNeverSyncNoNode))
	waitPhase(t, g.Name, ngv1.PhaseCreating)
	consistently(t, 4*time.Second, func() error {
		if p := get(t, g.Name).Status.Phase; p != ngv1.PhaseCreating {
			return fmt.Errorf("never-sync-no-node group in phase %q", p)
		}
		if _, err := getNode("f-nonode-node0"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("node joined: %v", err)
		}
		return nil
	})
}

// A refusal the provider cannot classify: an unknown ReconcileFailed reason, empty message,
// as the first write of a group never Creating. It takes nothing of the quota.
func TestFaultUnknownRefusal(t *testing.T) {
	h := record(t, "f-unknown")
	g := create(t, withFault(newGroup("f-unknown", "M", 1), operator.FaultUnknownRefusal))
	got := waitPhase(t, g.Name, operator.ReasonNetworkUnavailable)
	if c := condition(got, ngv1.ConditionReconcileFailed); c.Status != "True" || c.Reason != operator.ReasonNetworkUnavailable || c.Message != "" {
		t.Errorf("ReconcileFailed = %+v, want True, NetworkUnavailable, empty message", c)
	}
	// The whole quota is free: an M (24 + 16 = 40 GB) is accepted beside it.
	create(t, newGroup("f-unknown-m", "M", 1))
	waitPhase(t, "f-unknown-m", ngv1.PhaseCreating)
	for _, w := range h.writes() {
		if w.status.Phase != operator.ReasonNetworkUnavailable || len(w.status.Conditions) != 1 {
			t.Errorf("refused group wrote %+v", w.status)
		}
	}
	if _, err := getNode("f-unknown-node0"); !apierrors.IsNotFound(err) {
		t.Errorf("refused group got a node: %v", err)
	}
}

// A launch that looks dead: Creating, then no node and ReconcileInProgress=False with an
// unknown ReconcileFailed reason, still Creating, forever.
func TestFaultDeadLaunch(t *testing.T) {
	configure(t, func(o *operator.Options) { o.UnknownFailureReason = "VMBootTimeout" })
	h := record(t, "f-dead")
	g := create(t, withFault(newGroup("f-dead", "2XS", 1), operator.FaultDeadLaunch))
	eventually(t, 10*time.Second, func() error {
		s := get(t, g.Name).Status
		if !hasCondition(s, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, "VMBootTimeout") {
			return fmt.Errorf("status %+v, want ReconcileFailed=True reason VMBootTimeout", s)
		}
		return nil
	})
	consistently(t, 2*time.Second, func() error {
		s := get(t, g.Name).Status
		if s.Phase != ngv1.PhaseCreating ||
			!hasConditionMessage(s, ngv1.ConditionReconcileInProgress, metav1.ConditionFalse, "VMBootTimeout", "") ||
			!hasConditionMessage(s, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, "VMBootTimeout", "") {
			return fmt.Errorf("dead launch shows %+v", s)
		}
		if _, err := getNode("f-dead-node0"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("dead launch got a node: %v", err)
		}
		return nil
	})
	if w := h.writes(); len(w) == 0 || w[0].status.Phase != ngv1.PhaseCreating ||
		!hasCondition(w[0].status, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, ngv1.ReasonCreating) {
		t.Errorf("writes %+v, want the acceptance (Creating) first", w)
	}
}

// A platform-wide upstream failure: while it lasts, every group whose creation or resize runs
// shows UpstreamError and makes no progress, groups at rest are untouched; afterwards each
// proceeds on its own.
func TestUpstreamOutage(t *testing.T) {
	configure(t, func(o *operator.Options) { o.QuotaCPU, o.QuotaRAMGB = 100, 100 })
	idle, scaled, built, created := record(t, "o-idle"), record(t, "o-scaled"), record(t, "o-built"), record(t, "o-created")
	create(t, newGroup("o-idle", "2XS", 1))
	create(t, newGroup("o-scaled", "2XS", 1))
	waitPhase(t, "o-idle", ngv1.PhaseSynced)
	waitPhase(t, "o-scaled", ngv1.PhaseSynced)
	create(t, newGroup("o-built", "2XS", 1))
	waitPhase(t, "o-built", ngv1.PhaseCreating)

	const outage = 4 * time.Second
	start := time.Now()
	end := start.Add(outage)
	cluster.Operator().UpstreamOutage(start, outage)
	got := waitPhase(t, "o-built", ngv1.PhaseUpstreamError)
	if !hasCondition(got.Status, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, ngv1.ReasonCreating) ||
		!hasConditionMessage(got.Status, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, ngv1.ReasonUpstreamError, operator.UpstreamErrorMessage) {
		t.Errorf("group being built shows %+v", got.Status)
	}
	create(t, newGroup("o-created", "2XS", 1))
	if err := update(t, "o-scaled", func(g *ngv1.NodeGroup) { g.Spec.NodeCount = 2 }); err != nil {
		t.Fatal(err)
	}
	got = waitPhase(t, "o-scaled", ngv1.PhaseUpstreamError)
	if !hasCondition(got.Status, ngv1.ConditionReady, metav1.ConditionTrue, ngv1.ReasonSynced) ||
		!hasCondition(got.Status, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, ngv1.ReasonScaling) ||
		!hasConditionMessage(got.Status, ngv1.ConditionReconcileFailed, metav1.ConditionTrue, ngv1.ReasonUpstreamError, operator.UpstreamErrorMessage) {
		t.Errorf("group scaled during the outage shows %+v, want the live shape", got.Status)
	}
	waitPhase(t, "o-created", ngv1.PhaseUpstreamError)
	// Nothing moves while the outage lasts.
	consistently(t, time.Until(end.Add(-500*time.Millisecond)), func() error {
		for _, n := range []string{"o-built-node0", "o-created-node0", "o-scaled-node1"} {
			if _, err := getNode(n); !apierrors.IsNotFound(err) {
				return fmt.Errorf("node %s during the outage: %v", n, err)
			}
		}
		return nil
	})
	for _, name := range []string{"o-built", "o-created", "o-scaled"} {
		got := waitPhase(t, name, ngv1.PhaseSynced)
		if c := condition(got, ngv1.ConditionReconcileFailed); c.Status != "False" {
			t.Errorf("%s: ReconcileFailed after the outage %+v", name, c)
		}
	}
	for _, n := range []string{"o-built-node0", "o-created-node0", "o-scaled-node1"} {
		node := waitNodeReady(t, n)
		// Creation timestamps have a one-second resolution.
		if node.CreationTimestamp.Time.Before(end.Add(-time.Second)) {
			t.Errorf("node %s joined at %s, during the outage (ended %s)", n, node.CreationTimestamp.Time, end)
		}
	}
	if w := created.writes(); len(w) == 0 || w[0].status.Phase != ngv1.PhaseUpstreamError ||
		!hasCondition(w[0].status, ngv1.ConditionReconcileInProgress, metav1.ConditionTrue, ngv1.ReasonCreating) {
		t.Errorf("group created during the outage first wrote %+v, want Creating and UpstreamError", w)
	}
	for name, h := range map[string]*history{"o-idle": idle, "o-built": built, "o-scaled": scaled} {
		for _, w := range h.writes() {
			if w.at.Before(start) && w.status.Phase == ngv1.PhaseUpstreamError {
				t.Errorf("%s: UpstreamError before the outage: %+v", name, w.status)
			}
			if name == "o-idle" && w.status.Phase != ngv1.PhaseCreating && w.status.Phase != ngv1.PhaseSynced {
				t.Errorf("group at rest wrote %+v during the outage", w.status)
			}
		}
	}
}

func TestGlobalFault(t *testing.T) {
	configure(t, func(o *operator.Options) { o.Faults = []operator.Fault{operator.FaultNeverSyncNoNode} })
	g := create(t, newGroup("f-global", "2XS", 1))
	waitPhase(t, g.Name, ngv1.PhaseCreating)
	// An annotation overrides the global faults, here with none.
	ok := create(t, withFault(newGroup("f-override", "2XS", 0), ""))
	waitPhase(t, ok.Name, ngv1.PhaseSynced)
	if p := get(t, g.Name).Status.Phase; p != ngv1.PhaseCreating {
		t.Errorf("globally faulted group in phase %q", p)
	}
}

func TestQuotaBatchRefusesConcurrentCreations(t *testing.T) {
	configure(t, func(o *operator.Options) { o.QuotaBatchWindow = 2 * time.Second; o.LegacyQuotaMessage = true })
	// Each M (10 / 16) fits alone beside the control plane; both together need 56 GB.
	create(t, newGroup("b-1", "M", 1))
	create(t, newGroup("b-2", "M", 1))
	for _, name := range []string{"b-1", "b-2"} {
		g := waitPhase(t, name, ngv1.PhaseQuotaExceeded)
		if c := condition(g, ngv1.ConditionReconcileFailed); c.Message != "Quota exceeded: RAM max: limit = 40.0 GB | actual = 56.0 GB" {
			t.Errorf("%s: ReconcileFailed = %+v", name, c)
		}
	}
}

// With the live profile's timings (decision 1 s, window 1 s) a batch is judged at its first
// member's decision: two creations half a second apart are refused together, and each gets
// its first write about a second after its own creation, not a window later.
func TestQuotaBatchKeepsTheDecisionDelay(t *testing.T) {
	configure(t, func(o *operator.Options) { o.DecisionDelay, o.QuotaBatchWindow = time.Second, time.Second })
	first, second := record(t, "bd-1"), record(t, "bd-2")
	// Each M (10 / 16) fits alone beside the control plane; both together need 56 GB.
	start1 := time.Now()
	create(t, newGroup("bd-1", "M", 1))
	// The second creation lands inside the first's window: once the operator holds the first
	// (its finalizer), the batch is open.
	eventually(t, time.Second, func() error {
		if !controllerutil.ContainsFinalizer(get(t, "bd-1"), operator.Finalizer) {
			return errors.New("bd-1 not seen by the operator yet")
		}
		return nil
	})
	start2 := time.Now()
	create(t, newGroup("bd-2", "M", 1))
	for _, c := range []struct {
		name  string
		h     *history
		start time.Time
	}{{"bd-1", first, start1}, {"bd-2", second, start2}} {
		waitPhase(t, c.name, ngv1.PhaseQuotaExceeded)
		w := c.h.writes()
		if len(w) == 0 {
			t.Fatalf("%s: no status write seen", c.name)
		}
		if d := w[0].at.Sub(c.start); d < time.Second || d > 1600*time.Millisecond {
			t.Errorf("%s: first write %s after creation, want the 1 s decision delay (≤ 1.6 s)", c.name, d)
		}
		if w[0].status.Phase != ngv1.PhaseQuotaExceeded {
			t.Errorf("%s: first write in phase %q, want QuotaExceeded", c.name, w[0].status.Phase)
		}
	}
}

// create → refuse → delete leaks the refused reservation.
func TestQuotaLeakAfterRefusal(t *testing.T) {
	configure(t, func(o *operator.Options) { o.LeakedReservationTTL = time.Hour; o.LegacyQuotaMessage = true })
	create(t, newGroup("l-big", "M", 2)) // 24 + 32 = 56 GB: refused
	waitPhase(t, "l-big", ngv1.PhaseQuotaExceeded)
	deleteAndWait(t, "l-big")
	// Alone it would fit (40 GB), but the leaked 32 GB still count.
	create(t, newGroup("l-small", "M", 1))
	g := waitPhase(t, "l-small", ngv1.PhaseQuotaExceeded)
	if c := condition(g, ngv1.ConditionReconcileFailed); c.Message != "Quota exceeded: RAM max: limit = 40.0 GB | actual = 72.0 GB" {
		t.Errorf("ReconcileFailed = %+v", c)
	}
}

// Deleting a group while its first reconcile runs (Creating) leaks its reservation.
func TestQuotaLeakOnDeleteDuringCreation(t *testing.T) {
	configure(t, func(o *operator.Options) {
		o.LeakedReservationTTL = time.Hour
		o.LegacyQuotaMessage = true
		o.SyncDelayMin, o.SyncDelayMax = time.Minute, time.Minute
	})
	create(t, newGroup("l-first", "M", 1)) // 24 + 16 = 40 GB: accepted
	waitPhase(t, "l-first", ngv1.PhaseCreating)
	deleteAndWait(t, "l-first")
	create(t, newGroup("l-next", "M", 1))
	g := waitPhase(t, "l-next", ngv1.PhaseQuotaExceeded)
	if c := condition(g, ngv1.ConditionReconcileFailed); c.Message != "Quota exceeded: RAM max: limit = 40.0 GB | actual = 56.0 GB" {
		t.Errorf("ReconcileFailed = %+v", c)
	}
}

// Deleting a group before its decision leaks what it asked for.
func TestQuotaLeakOnDeleteBeforeDecision(t *testing.T) {
	configure(t, func(o *operator.Options) {
		o.LeakedReservationTTL = time.Hour
		o.LegacyQuotaMessage = true
		o.DecisionDelay = 3 * time.Second
	})
	g := create(t, newGroup("l-early", "M", 1)) // 24 + 16 = 40 GB: would be accepted
	// The reconcile that holds the finalizer enlists the creation before the deletion's
	// reconcile can run.
	eventually(t, 5*time.Second, func() error {
		if !controllerutil.ContainsFinalizer(get(t, g.Name), operator.Finalizer) {
			return errors.New("l-early not seen by the operator yet")
		}
		return nil
	})
	deleteAndWait(t, g.Name)
	configure(t, func(o *operator.Options) { o.DecisionDelay = 200 * time.Millisecond })
	create(t, newGroup("l-later", "M", 1))
	got := waitPhase(t, "l-later", ngv1.PhaseQuotaExceeded)
	if c := condition(got, ngv1.ConditionReconcileFailed); c.Message != "Quota exceeded: RAM max: limit = 40.0 GB | actual = 56.0 GB" {
		t.Errorf("ReconcileFailed = %+v", c)
	}
}

// Use by the organisation's other clusters counts, though nothing in the cluster shows it.
func TestQuotaOtherClusters(t *testing.T) {
	configure(t, func(o *operator.Options) { o.OtherClusterCPU, o.OtherClusterGB = 2, 4; o.LegacyQuotaMessage = true })
	create(t, newGroup("oc-m", "M", 1)) // 24 + 4 + 16 = 44 GB
	got := waitPhase(t, "oc-m", ngv1.PhaseQuotaExceeded)
	if c := condition(got, ngv1.ConditionReconcileFailed); c.Message != "Quota exceeded: RAM max: limit = 40.0 GB | actual = 44.0 GB" {
		t.Errorf("ReconcileFailed = %+v", c)
	}
	// Once the other clusters give their share back, the same ask fits exactly.
	configure(t, func(o *operator.Options) { o.OtherClusterCPU, o.OtherClusterGB = 0, 0 })
	create(t, newGroup("oc-m2", "M", 1))
	waitPhase(t, "oc-m2", ngv1.PhaseCreating)
}

// A group deleted once Synced gives its reservation back.
func TestQuotaNoLeakOnDeleteAfterSync(t *testing.T) {
	configure(t, func(o *operator.Options) { o.LeakedReservationTTL = time.Hour })
	create(t, newGroup("l-synced", "M", 1))
	waitPhase(t, "l-synced", ngv1.PhaseSynced)
	deleteAndWait(t, "l-synced")
	create(t, newGroup("l-after", "M", 1))
	waitPhase(t, "l-after", ngv1.PhaseCreating)
}

func TestPodsRunOnSimulatedNodes(t *testing.T) {
	ctx := context.Background()
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		NodeSelector: map[string]string{ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane},
		Containers:   []corev1.Container{{Name: "app", Image: "example.com/app"}},
	}}
	pod.Name, pod.Namespace = "runs", "default"
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	eventually(t, 30*time.Second, func() error {
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
			return fmt.Errorf("pod %s on %q", p.Status.Phase, p.Spec.NodeName)
		}
		return nil
	})
	if err := k8s.Delete(ctx, pod); err != nil {
		t.Fatalf("deleting pod: %v", err)
	}
	eventually(t, 30*time.Second, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod still there (%v)", err)
		}
		return nil
	})
}

// snapshot is one status a group was seen with, and when.
type snapshot struct {
	at     time.Time
	status ngv1.NodeGroupStatus
}

// history records every version of one group, from before its creation.
type history struct {
	mu    sync.Mutex
	snaps []snapshot
}

func record(t *testing.T, name string) *history {
	t.Helper()
	w, err := k8s.Watch(context.Background(), &ngv1.NodeGroupList{}, client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatalf("watching NodeGroup %q: %v", name, err)
	}
	t.Cleanup(w.Stop)
	h := &history{}
	go func() {
		for ev := range w.ResultChan() {
			if g, ok := ev.Object.(*ngv1.NodeGroup); ok {
				h.mu.Lock()
				h.snaps = append(h.snaps, snapshot{at: time.Now(), status: g.Status})
				h.mu.Unlock()
			}
		}
	}()
	return h
}

// writes are the distinct non-empty statuses seen, in order.
func (h *history) writes() []snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []snapshot
	for _, s := range h.snaps {
		if s.status.Phase == "" && len(s.status.Conditions) == 0 {
			continue
		}
		if len(out) > 0 && fmt.Sprint(out[len(out)-1].status) == fmt.Sprint(s.status) {
			continue
		}
		out = append(out, s)
	}
	return out
}

func hasCondition(s ngv1.NodeGroupStatus, t string, status metav1.ConditionStatus, reason string) bool {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status == status && c.Reason == reason
		}
	}
	return false
}

func hasConditionMessage(s ngv1.NodeGroupStatus, t string, status metav1.ConditionStatus, reason, message string) bool {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status == status && c.Reason == reason && c.Message == message
		}
	}
	return false
}

func nodeReadyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func nodeReadyTrue(n *corev1.Node) bool {
	c := nodeReadyCondition(n)
	return c != nil && c.Status == corev1.ConditionTrue
}

func withLabels(g *ngv1.NodeGroup, l map[string]string) *ngv1.NodeGroup {
	g.Spec.Labels = l
	return g
}

func withTaints(g *ngv1.NodeGroup, ts ...ngv1.Taint) *ngv1.NodeGroup {
	g.Spec.Taints = ts
	return g
}

func withFault(g *ngv1.NodeGroup, f operator.Fault) *ngv1.NodeGroup {
	g.Annotations = map[string]string{operator.FaultAnnotation: string(f)}
	return g
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
