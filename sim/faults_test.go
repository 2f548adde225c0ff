package sim_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
)

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
