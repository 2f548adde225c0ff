package sim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
)

func TestCRDRejectsWhatThePlatformRejects(t *testing.T) {
	ctx := context.Background()
	for name, g := range map[string]*ngv1.NodeGroup{
		"nodeCount above 16":     newGroup("v-17", "S", 17),
		"negative nodeCount":     newGroup("v-neg", "S", -1),
		"lowercase flavor":       newGroup("v-lower", "s", 1),
		"kubernetes.io/ label":   withLabels(newGroup("v-k8s", "S", 0), map[string]string{"kubernetes.io/role": "x"}),
		"node.kubernetes.io/":    withLabels(newGroup("v-node", "S", 0), map[string]string{"node.kubernetes.io/x": "y"}),
		"clever-cloud.com/":      withLabels(newGroup("v-cc", "S", 0), map[string]string{"clever-cloud.com/flavor": "S"}),
		"label value with space": withLabels(newGroup("v-space", "S", 0), map[string]string{"team": "a b"}),
		"label value of 64":      withLabels(newGroup("v-long", "S", 0), map[string]string{"team": strings.Repeat("a", 64)}),
		"bad label key":          withLabels(newGroup("v-key", "S", 0), map[string]string{"-bad": "x"}),
		"bad taint effect":       withTaints(newGroup("v-effect", "S", 0), ngv1.Taint{Key: "k", Effect: "Sometimes"}),
	} {
		err := k8s.Create(ctx, g)
		if err == nil {
			deleteAndWait(t, g.Name)
		}
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: want Invalid, got %v", name, err)
		}
	}

	// A valid group: only nodeCount may change afterwards.
	g := create(t, withTaints(withLabels(newGroup("v-ok", "S", 0), map[string]string{"team": "a", "example.com/tier": "gold"}),
		ngv1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}))
	mutations := map[string]func(*ngv1.NodeGroup){
		"flavor change":  func(g *ngv1.NodeGroup) { g.Spec.Flavor = "M" },
		"label change":   func(g *ngv1.NodeGroup) { g.Spec.Labels["team"] = "b" },
		"label removal":  func(g *ngv1.NodeGroup) { g.Spec.Labels = nil },
		"taint change":   func(g *ngv1.NodeGroup) { g.Spec.Taints[0].Value = "y" },
		"taints removal": func(g *ngv1.NodeGroup) { g.Spec.Taints = nil },
	}
	for name, mutate := range mutations {
		if err := update(t, g.Name, mutate); !apierrors.IsInvalid(err) {
			t.Errorf("%s: want Invalid, got %v", name, err)
		}
	}
	create(t, newGroup("v-nolabels", "S", 0))
	if err := update(t, "v-nolabels", func(g *ngv1.NodeGroup) { g.Spec.Labels = map[string]string{"team": "a"} }); !apierrors.IsInvalid(err) {
		t.Errorf("adding labels after creation: want Invalid, got %v", err)
	}
	if err := update(t, g.Name, func(g *ngv1.NodeGroup) { g.Spec.NodeCount = 2 }); err != nil {
		t.Errorf("changing nodeCount: %v", err)
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

func TestQuotaAtExactTotals(t *testing.T) {
	// Control plane: 2 × S = 16 vCPU / 24 GB. One M (10 / 16) reaches exactly 40 GB.
	create(t, newGroup("q-m", "M", 1))
	g := waitPhase(t, "q-m", ngv1.PhaseSynced)
	if c := condition(g, ngv1.ConditionReady); c.Status != "True" {
		t.Errorf("accepted group Ready = %+v", c)
	}
	// One 2XS more (4 / 4) overflows RAM: 44 GB.
	create(t, newGroup("q-2xs", "2XS", 1))
	g = waitPhase(t, "q-2xs", ngv1.PhaseQuotaExceeded)
	c := condition(g, ngv1.ConditionReconcileFailed)
	if c.Status != "True" || c.Reason != ngv1.ReasonQuotaExceeded || c.Message != "Quota exceeded: RAM max: limit = 40.0 GB | actual = 44.0 GB" {
		t.Errorf("ReconcileFailed = %+v", c)
	}
	if _, err := getNode("q-2xs-node0"); !apierrors.IsNotFound(err) {
		t.Errorf("rejected group got a node: %v", err)
	}
	waitNodeReady(t, "q-m-node0")
}

func TestQuotaCPUMessage(t *testing.T) {
	configure(t, func(o *operator.Options) { o.QuotaRAMGB = 1000 })
	// 16 (control plane) + 6 × 4 = 40 vCPU: accepted; then 4 more: 44.
	create(t, newGroup("c-a", "2XS", 6))
	waitPhase(t, "c-a", ngv1.PhaseSynced)
	create(t, newGroup("c-b", "2XS", 1))
	g := waitPhase(t, "c-b", ngv1.PhaseQuotaExceeded)
	if c := condition(g, ngv1.ConditionReconcileFailed); c.Message != "Quota exceeded: CPU max: limit = 40 | actual = 44" {
		t.Errorf("ReconcileFailed = %+v", c)
	}
}

func TestNodeLifecycle(t *testing.T) {
	ctx := context.Background()
	g := create(t, withTaints(withLabels(newGroup("life", "XS", 1), map[string]string{"team": "blue"}),
		ngv1.Taint{Key: "dedicated", Value: "blue", Effect: corev1.TaintEffectNoSchedule}))
	got := waitPhase(t, g.Name, ngv1.PhaseSynced)
	if !controllerutil.ContainsFinalizer(got, operator.Finalizer) {
		t.Errorf("no finalizer on accepted group: %v", got.Finalizers)
	}
	n := waitNodeReady(t, "life-node0")
	for k, v := range map[string]string{
		ngv1.LabelNodeGroup: "life", ngv1.LabelFlavor: "XS", ngv1.LabelClusterNodeRole: ngv1.NodeRoleWorker,
		"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": "life-node0",
		"node.kubernetes.io/instance-type": "XS", "topology.kubernetes.io/region": "par", "topology.kubernetes.io/zone": "par",
		"team": "blue",
	} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
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
	for res, want := range map[corev1.ResourceName]string{"cpu": "6", "memory": "7835180Ki", "ephemeral-storage": "36874339Ki", "pods": "110"} {
		if q := n.Status.Allocatable[res]; q.String() != want {
			t.Errorf("allocatable %s = %s, want %s", res, q.String(), want)
		}
	}
	eventually(t, 10*time.Second, func() error {
		if s := get(t, g.Name).Status; s.NodeCount != 1 || s.TargetNodeCount != 1 {
			return fmt.Errorf("status nodeCount %d target %d", s.NodeCount, s.TargetNodeCount)
		}
		return nil
	})

	// Karpenter holds a finalizer on its nodes: the group must wait for the Node to go.
	const held = "test.sim/hold"
	patchNodeFinalizers(t, n.Name, []string{held})
	if err := k8s.Delete(ctx, got); err != nil {
		t.Fatalf("deleting NodeGroup: %v", err)
	}
	eventually(t, 10*time.Second, func() error {
		n, err := getNode("life-node0")
		if err != nil || n.DeletionTimestamp.IsZero() {
			return fmt.Errorf("node not terminating yet (%v)", err)
		}
		if c := condition(get(t, g.Name), ngv1.ConditionTerminating); c.Status != "True" {
			return fmt.Errorf("Terminating condition %+v", c)
		}
		return nil
	})
	consistently(t, time.Second, func() error {
		_, err := getNode("life-node0")
		if err := k8s.Get(ctx, client.ObjectKey{Name: g.Name}, &ngv1.NodeGroup{}); err != nil {
			return fmt.Errorf("NodeGroup went before its node: %v", err)
		}
		return err
	})
	patchNodeFinalizers(t, n.Name, nil)
	waitNodeGone(t, "life-node0")
	deleteAndWait(t, g.Name)
}

func TestOutOfBandResize(t *testing.T) {
	ctx := context.Background()
	g := create(t, newGroup("resize", "2XS", 1))
	waitNodeReady(t, "resize-node0")

	scale := func(n int32) {
		t.Helper()
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
		// The scale subresource answers with a Scale, so the patch targets a throwaway copy.
		if err := k8s.SubResource("scale").Patch(ctx, get(t, g.Name), patch); err != nil {
			t.Fatalf("scaling to %d: %v", n, err)
		}
	}
	scale(3)
	waitNodeReady(t, "resize-node1")
	waitNodeReady(t, "resize-node2")
	eventually(t, 10*time.Second, func() error {
		if s := get(t, g.Name).Status; s.NodeCount != 3 {
			return fmt.Errorf("status nodeCount %d", s.NodeCount)
		}
		return nil
	})
	scale(1)
	waitNodeGone(t, "resize-node2")
	waitNodeGone(t, "resize-node1")
	if _, err := getNode("resize-node0"); err != nil {
		t.Errorf("node0 should stay: %v", err)
	}
	// Beyond the quota (16/24 + 3 × 2XS = 28/36; 5 × 2XS = 36/44): rejected, nodes kept.
	scale(5)
	got := waitPhase(t, g.Name, ngv1.PhaseQuotaExceeded)
	if c := condition(got, ngv1.ConditionReconcileFailed); c.Message != "Quota exceeded: RAM max: limit = 40.0 GB | actual = 44.0 GB" {
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
	eventually(t, 10*time.Second, func() error {
		if c := condition(get(t, g.Name), ngv1.ConditionReconcileInProgress); c.Status != "True" {
			return fmt.Errorf("ReconcileInProgress %+v", c)
		}
		return nil
	})
	consistently(t, 2*time.Second, func() error {
		if s := get(t, g.Name).Status; s.Phase != "" || condition(get(t, g.Name), ngv1.ConditionReady).Status == "True" {
			return fmt.Errorf("never-accept group judged: %+v", s)
		}
		return nil
	})
}

func TestFaultVanishAfterAccept(t *testing.T) {
	configure(t, func(o *operator.Options) { o.VanishDelay = time.Second; o.BootDelay = 5 * time.Second })
	g := create(t, withFault(newGroup("f-vanish", "2XS", 1), operator.FaultVanishAfterAccept))
	waitPhase(t, g.Name, ngv1.PhaseSynced)
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
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return fmt.Errorf("node became Ready")
			}
		}
		return nil
	})
}

func TestFaultSlowBoot(t *testing.T) {
	configure(t, func(o *operator.Options) { o.SlowBootDelay = 3 * time.Second })
	g := create(t, withFault(newGroup("f-slow", "2XS", 1), operator.FaultSlowBoot))
	synced := waitPhase(t, g.Name, ngv1.PhaseSynced)
	n := waitNodeReady(t, "f-slow-node0")
	// Both stamps come from this machine's clock at second resolution: a 3 s boot is ≥ 2 s
	// apart whatever the truncation, a normal (instant) boot at most 1 s. The test's own
	// observation of the acceptance would lag under load and shorten the gap.
	ready := meta.FindStatusCondition(synced.Status.Conditions, ngv1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		t.Fatalf("accepted group without Ready=True: %+v", synced.Status.Conditions)
	}
	if d := n.CreationTimestamp.Sub(ready.LastTransitionTime.Time); d < 2*time.Second {
		t.Errorf("slow boot joined %s after acceptance, want ≥ ~3s", d)
	}
}

func TestGlobalFault(t *testing.T) {
	configure(t, func(o *operator.Options) { o.Faults = []operator.Fault{operator.FaultNeverAccept} })
	g := create(t, newGroup("f-global", "2XS", 1))
	eventually(t, 10*time.Second, func() error {
		if c := condition(get(t, g.Name), ngv1.ConditionReconcileInProgress); c.Status != "True" {
			return fmt.Errorf("ReconcileInProgress %+v", c)
		}
		return nil
	})
	// An annotation overrides the global faults, here with none.
	ok := create(t, withFault(newGroup("f-override", "2XS", 0), ""))
	waitPhase(t, ok.Name, ngv1.PhaseSynced)
	if get(t, g.Name).Status.Phase != "" {
		t.Errorf("globally faulted group was judged")
	}
}

func TestQuotaBatchRejectsConcurrentCreations(t *testing.T) {
	configure(t, func(o *operator.Options) { o.QuotaBatchWindow = 2 * time.Second })
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

func TestQuotaLeakedReservation(t *testing.T) {
	configure(t, func(o *operator.Options) { o.LeakedReservationTTL = time.Hour })
	create(t, newGroup("l-big", "M", 2)) // 24 + 32 = 56 GB: rejected
	waitPhase(t, "l-big", ngv1.PhaseQuotaExceeded)
	deleteAndWait(t, "l-big")
	// Alone it would fit (40 GB), but the leaked 32 GB still count.
	create(t, newGroup("l-small", "M", 1))
	g := waitPhase(t, "l-small", ngv1.PhaseQuotaExceeded)
	if c := condition(g, ngv1.ConditionReconcileFailed); c.Message != "Quota exceeded: RAM max: limit = 40.0 GB | actual = 72.0 GB" {
		t.Errorf("ReconcileFailed = %+v", c)
	}
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
