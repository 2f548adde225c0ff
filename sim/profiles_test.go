package sim_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
)

// The tests below check properties the two profiles must hold, not their values: the live
// profile must sit inside what the platform was measured doing (docs/cke-platform.md of the
// spec, cited per figure), and the fast profile must be the same story told faster. A value
// may move within those bounds without a test failing; a profile that tells the story wrong
// fails.

func profiles() map[string]sim.Options {
	return map[string]sim.Options{"live": sim.LiveOptions(), "fast": sim.FastOptions()}
}

// A group's life, in the order the platform plays it (cke-platform.md §1, "What the
// operator writes, over time"): the decision is the first status write, the node joins while
// the group is still Creating, Synced comes after the join, and the slow outlier after any
// typical sync. A slow boot (or slow join) comes after any typical join.
func TestProfilesKeepThePlatformsOrder(t *testing.T) {
	for name, o := range profiles() {
		op := o.Operator
		latestJoin := max(op.JoinDelay, op.JoinDelayMax)
		steps := []struct {
			earlier, later string
			a, b           time.Duration
			strict         bool
		}{
			{"decision", "join", op.DecisionDelay, op.JoinDelay, true},
			{"join", "earliest Synced", op.JoinDelay, op.SyncDelayMin, false},
			{"earliest join", "latest typical join", op.JoinDelay, latestJoin, false},
			{"earliest Synced", "latest Synced", op.SyncDelayMin, op.SyncDelayMax, false},
			{"latest Synced", "slow outlier's Synced", op.SyncDelayMax, op.SlowSyncDelay, true},
			{"latest typical join", "slow boot's join", latestJoin, op.SlowBootDelay, true},
		}
		for _, s := range steps {
			if s.a > s.b || (s.strict && s.a == s.b) {
				t.Errorf("%s profile: %s at %s, %s at %s: the platform plays %s first", name, s.earlier, s.a, s.later, s.b, s.earlier)
			}
		}
	}
}

// Every delay of the timeline is positive: a zero one would make two steps of the platform's
// sequence simultaneous and hide an ordering bug in the provider. Spread in the Synced delay
// is the platform's jitter (38–58 s, §6): both profiles keep some, so groups sync in varying
// order, and the outlier is an outlier: rare, never the rule.
func TestProfilesDelaysArePositiveAndJitterBounded(t *testing.T) {
	for name, o := range profiles() {
		op := o.Operator
		for field, d := range map[string]time.Duration{
			"DecisionDelay": op.DecisionDelay, "JoinDelay": op.JoinDelay,
			"SyncDelayMin": op.SyncDelayMin, "SyncDelayMax": op.SyncDelayMax, "SlowSyncDelay": op.SlowSyncDelay,
			"TeardownDelay": op.TeardownDelay, "VanishDelay": op.VanishDelay, "SlowBootDelay": op.SlowBootDelay,
			"UpstreamErrorDuration": op.UpstreamErrorDuration,
		} {
			if d <= 0 {
				t.Errorf("%s profile: %s = %s, want > 0", name, field, d)
			}
		}
		spread := op.SyncDelayMax - op.SyncDelayMin
		if spread <= 0 {
			t.Errorf("%s profile: Synced drawn in %s–%s: no jitter", name, op.SyncDelayMin, op.SyncDelayMax)
		}
		// The live spread (20 s) is about half the earliest sync: a wider one would let the
		// draw reach far outside anything measured.
		if spread > op.SyncDelayMin {
			t.Errorf("%s profile: Synced drawn in %s–%s: the jitter exceeds the delay itself", name, op.SyncDelayMin, op.SyncDelayMax)
		}
		for field, p := range map[string]float64{"SlowSyncProbability": op.SlowSyncProbability, "SlowJoinProbability": op.SlowJoinProbability} {
			if p < 0 || p > 0.1 {
				t.Errorf("%s profile: %s %v, want an outlier's (0–10 %%)", name, field, p)
			}
		}
	}
}

// within is a measured figure as the platform doc gives it: a range, or a typical value with
// the tolerance its "about" allows.
type within struct {
	min, max time.Duration
	fact     string
}

// The live profile's timings lie where the platform doc measured them.
func TestLiveProfileMatchesMeasuredTimings(t *testing.T) {
	op := sim.LiveOptions().Operator
	for field, c := range map[string]struct {
		got time.Duration
		within
	}{
		"DecisionDelay": {op.DecisionDelay, within{500 * time.Millisecond, 1500 * time.Millisecond,
			"§6: created → first status write ~1 s"}},
		"JoinDelay": {op.JoinDelay, within{26 * time.Second, 28 * time.Second,
			"§6: created → Node joins 26–60 s, ~28 s typical: the floor of the draw"}},
		"JoinDelayMax": {op.JoinDelayMax, within{50 * time.Second, 60 * time.Second,
			"§6: created → Node joins 26–60 s: the top of the draw"}},
		"TypicalJoinDelay": {op.TypicalJoinDelay(), within{27 * time.Second, 29 * time.Second,
			"§6: created → Node joins ~28 s typical: the draw's median"}},
		"SyncDelayMin": {op.SyncDelayMin, within{38 * time.Second, 58 * time.Second,
			"§6: created → Synced 38–58 s typical"}},
		"SyncDelayMax": {op.SyncDelayMax, within{38 * time.Second, 58 * time.Second,
			"§6: created → Synced 38–58 s typical"}},
		"SlowSyncDelay": {op.SlowSyncDelay, within{6 * time.Minute, 7 * time.Minute,
			"§1/§6: one group stayed Creating 6 min 30 s"}},
		"SlowBootDelay": {op.SlowBootDelay, within{60 * time.Second, 185 * time.Second,
			"§6: Node joins 26–60 s, up to 185 s"}},
		"TeardownDelay": {op.TeardownDelay, within{30 * time.Second, 40 * time.Second,
			"§1/§6: deleted → Node gone 30–40 s"}},
		"VanishDelay": {op.VanishDelay, within{time.Second, time.Minute,
			"§5: an accepted group deleted upstream seconds later"}},
		"UpstreamErrorDuration": {op.UpstreamErrorDuration, within{30 * time.Minute, 2 * time.Hour,
			"§1: the operator retried for about an hour"}},
		"LeakedReservationTTL": {op.LeakedReservationTTL, within{time.Minute, 10 * time.Minute,
			"§5: leaked reservations stayed for minutes"}},
	} {
		if c.got < c.min || c.got > c.max {
			t.Errorf("live %s = %s, outside %s–%s (%s)", field, c.got, c.min, c.max, c.fact)
		}
	}
	// §5: "concurrent creations are evaluated together": a batch window, closed by the time
	// the first member's verdict is written (the decision lands ~1 s after creation).
	if op.QuotaBatchWindow <= 0 || op.QuotaBatchWindow > op.DecisionDelay {
		t.Errorf("live quota batch window %s: want one, no longer than the decision delay %s (§5)", op.QuotaBatchWindow, op.DecisionDelay)
	}
	if op.SlowSyncProbability <= 0 {
		t.Error("live profile never plays the 6 min 30 s outlier (§1)")
	}
	if op.SlowJoinProbability <= 0 {
		t.Error("live profile never plays the 185 s join (§6)")
	}
}

// The joins the live profile draws for many groups are the platform's: all within 26–185 s
// (§6), half of them by about 28 s, some of them late in the minute, a rare one at 185 s.
func TestLiveProfileDrawsThePlatformsJoins(t *testing.T) {
	op := sim.LiveOptions().Operator
	const n = 2000
	joins := make([]time.Duration, 0, n)
	slow := 0
	for i := range n {
		d := op.JoinDelayOf(fmt.Sprintf("default-%d", i))
		if d < 26*time.Second || d > 185*time.Second {
			t.Errorf("group %d joins at %s, outside the platform's 26–185 s (§6)", i, d)
		}
		if d > time.Minute {
			slow++
		}
		joins = append(joins, d)
	}
	slices.Sort(joins)
	if median := joins[n/2]; median < 27*time.Second || median > 29*time.Second {
		t.Errorf("median join %s, the platform's typical is ~28 s (§6)", median)
	}
	if late := joins[n*9/10]; late < 40*time.Second {
		t.Errorf("nine joins in ten by %s: the 26–60 s spread (§6) is not played", late)
	}
	if slow == 0 || slow > n/20 {
		t.Errorf("%d of %d joins past a minute: want the rare 185 s join (§6), rare", slow, n)
	}
}

// The live profile's cluster is today's platform: the default organisation quota, refusals
// with an empty message, no topology labels from CKE, and a control plane that leaves room
// for at least one worker of the smallest flavor.
func TestLiveProfileIsTodaysPlatform(t *testing.T) {
	o := sim.LiveOptions()
	op := o.Operator
	if op.QuotaCPU != cke.DefaultQuotaCPU || op.QuotaRAMGB != cke.DefaultQuotaRAMGB {
		t.Errorf("live quota %d vCPU / %d GB, want the default organisation quota (§5)", op.QuotaCPU, op.QuotaRAMGB)
	}
	if cke.DefaultQuotaCPU != 40 || cke.DefaultQuotaRAMGB != 40 {
		t.Errorf("default quota %d vCPU / %d GB; the platform's is 40 vCPU / 40 GB (§5)", cke.DefaultQuotaCPU, cke.DefaultQuotaRAMGB)
	}
	if op.LegacyQuotaMessage {
		t.Error("live profile writes the 2026-06 refusal message; today's is empty (§1)")
	}
	if op.StampTopologyLabels {
		t.Error("live profile stamps topology labels; CKE does not set them (§2)")
	}
	if len(op.Faults) != 0 {
		t.Errorf("live profile injects faults into every group: %v", op.Faults)
	}
	cp, ok := cke.LookupFlavor(o.ControlPlaneFlavor)
	if !ok {
		t.Fatalf("control-plane flavor %q is not in the catalogue", o.ControlPlaneFlavor)
	}
	smallest := smallestFlavor(t)
	usedCPU, usedGB := cp.CPU*int64(o.ControlPlaneNodes), cp.NominalGB*int64(o.ControlPlaneNodes)
	if usedCPU+smallest.CPU > op.QuotaCPU || usedGB+smallest.NominalGB > op.QuotaRAMGB {
		t.Errorf("control plane %d × %s (%d vCPU / %d GB) leaves no room in the %d / %d quota for one %s worker",
			o.ControlPlaneNodes, cp.Name, usedCPU, usedGB, op.QuotaCPU, op.QuotaRAMGB, smallest.Name)
	}
}

func smallestFlavor(t *testing.T) cke.Flavor {
	t.Helper()
	var smallest cke.Flavor
	for _, f := range cke.Flavors() {
		if smallest.Name == "" || f.CPU < smallest.CPU || (f.CPU == smallest.CPU && f.NominalGB < smallest.NominalGB) {
			smallest = f
		}
	}
	if smallest.Name == "" {
		t.Fatal("empty flavor catalogue")
	}
	return smallest
}

// The fast profile is the live one compressed: every step comes no later than live, the
// cluster (quota, control plane, messages, labels, seed) is the same, and the quirks that
// would make unrelated tests flaky (the outliers, batched verdicts, leaked reservations) are
// off.
func TestFastProfileIsLiveCompressed(t *testing.T) {
	live, fast := sim.LiveOptions(), sim.FastOptions()
	lo, fo := live.Operator, fast.Operator
	for field, d := range map[string][2]time.Duration{
		"DecisionDelay": {lo.DecisionDelay, fo.DecisionDelay}, "JoinDelay": {lo.JoinDelay, fo.JoinDelay},
		"JoinDelayMax": {lo.JoinDelayMax, fo.JoinDelayMax}, "TypicalJoinDelay": {lo.TypicalJoinDelay(), fo.TypicalJoinDelay()},
		"SyncDelayMin": {lo.SyncDelayMin, fo.SyncDelayMin}, "SyncDelayMax": {lo.SyncDelayMax, fo.SyncDelayMax},
		"SlowSyncDelay": {lo.SlowSyncDelay, fo.SlowSyncDelay}, "TeardownDelay": {lo.TeardownDelay, fo.TeardownDelay},
		"VanishDelay": {lo.VanishDelay, fo.VanishDelay}, "SlowBootDelay": {lo.SlowBootDelay, fo.SlowBootDelay},
		"UpstreamErrorDuration": {lo.UpstreamErrorDuration, fo.UpstreamErrorDuration},
	} {
		if d[1] > d[0] {
			t.Errorf("fast %s = %s is slower than live %s", field, d[1], d[0])
		}
	}
	if fo.SlowSyncProbability != 0 || fo.SlowJoinProbability != 0 || fo.QuotaBatchWindow != 0 || fo.LeakedReservationTTL != 0 {
		t.Errorf("fast profile plays an outlier (sync %v, join %v) or a quota quirk (batch %s, leak %s)", fo.SlowSyncProbability, fo.SlowJoinProbability, fo.QuotaBatchWindow, fo.LeakedReservationTTL)
	}
	// Everything but the timings and the quirks is the live profile's.
	strip := func(o sim.Options) sim.Options {
		o.Operator = operator.Options{
			QuotaCPU: o.Operator.QuotaCPU, QuotaRAMGB: o.Operator.QuotaRAMGB,
			OtherClusterCPU: o.Operator.OtherClusterCPU, OtherClusterGB: o.Operator.OtherClusterGB,
			Seed: o.Operator.Seed, Faults: o.Operator.Faults, UnknownFailureReason: o.Operator.UnknownFailureReason,
			LegacyQuotaMessage: o.Operator.LegacyQuotaMessage, StampTopologyLabels: o.Operator.StampTopologyLabels,
		}
		return o
	}
	if a, b := strip(live), strip(fast); !reflect.DeepEqual(a, b) {
		t.Errorf("fast profile's cluster differs from live beyond timings and quirks:\nlive %+v\nfast %+v", a, b)
	}
}

// Each call returns a fresh profile: a test that changes what it got must not change the
// next caller's.
func TestProfilesAreFreshValues(t *testing.T) {
	a := sim.LiveOptions()
	a.Operator.Faults = append(a.Operator.Faults, operator.FaultSlowBoot)
	a.Operator.JoinDelay = time.Hour
	a.ControlPlaneNodes++
	if b := sim.LiveOptions(); !reflect.DeepEqual(b, sim.LiveOptions()) || b.Operator.JoinDelay == time.Hour || len(b.Operator.Faults) != 0 || b.ControlPlaneNodes == a.ControlPlaneNodes {
		t.Errorf("changing one live profile changed the next: %+v", b)
	}
	f := sim.FastOptions()
	f.Operator.JoinDelay = time.Hour
	if sim.FastOptions().Operator.JoinDelay == time.Hour || sim.LiveOptions().Operator.JoinDelay == time.Hour {
		t.Error("changing a fast profile changed the next")
	}
}
