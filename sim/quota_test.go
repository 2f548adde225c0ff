package sim_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
)

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
