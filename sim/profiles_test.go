package sim_test

import (
	"testing"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
)

// The profiles keep the platform's order: decision, then the join, then Synced; the live one
// carries the measured envelope and the quota-engine quirks.
func TestProfiles(t *testing.T) {
	for name, o := range map[string]sim.Options{"live": sim.LiveOptions(), "fast": sim.FastOptions()} {
		op := o.Operator
		if !(op.DecisionDelay < op.JoinDelay && op.JoinDelay < op.SyncDelayMin && op.SyncDelayMin <= op.SyncDelayMax) {
			t.Errorf("%s: decision %s, join %s, sync %s–%s: want decision < join < sync", name, op.DecisionDelay, op.JoinDelay, op.SyncDelayMin, op.SyncDelayMax)
		}
		if op.QuotaCPU != 40 || op.QuotaRAMGB != 40 || o.ControlPlaneNodes != 2 || o.ControlPlaneFlavor != "S" {
			t.Errorf("%s: quota %d/%d, control plane %d × %s", name, op.QuotaCPU, op.QuotaRAMGB, o.ControlPlaneNodes, o.ControlPlaneFlavor)
		}
		if op.LegacyQuotaMessage || op.StampTopologyLabels {
			t.Errorf("%s: legacy message or topology labels on by default", name)
		}
	}
	live := sim.LiveOptions().Operator
	if live.DecisionDelay != time.Second || live.JoinDelay != 28*time.Second || live.SyncDelayMin != 38*time.Second ||
		live.SyncDelayMax != 58*time.Second || live.TeardownDelay < 30*time.Second || live.TeardownDelay > 40*time.Second ||
		live.SlowSyncDelay != 390*time.Second || live.SlowSyncProbability <= 0 || live.QuotaBatchWindow <= 0 || live.LeakedReservationTTL <= 0 {
		t.Errorf("live profile %+v is not the measured envelope", live)
	}
	fast := sim.FastOptions().Operator
	if fast.SlowSyncProbability != 0 || fast.QuotaBatchWindow != 0 || fast.LeakedReservationTTL != 0 {
		t.Errorf("fast profile %+v has the outlier or quirks on", fast)
	}
}
