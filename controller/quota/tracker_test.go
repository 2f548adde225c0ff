package quota_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

func TestUnknownLimitConstrainsNothing(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{})
	tr.Observe(quota.Usage{CPU: 1000, GB: 1000}, nil)
	h, known := tr.Headroom()
	g.Expect(known).To(BeFalse())
	g.Expect(quota.Usage{CPU: 16, GB: 32}.FitsIn(h)).To(BeTrue())
}

// The headroom of a resource whose limit is unknown reads as such, not as a huge number.
func TestHeadroomOfAnUnknownLimitSaysUnknown(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{CPU: 40})
	tr.Observe(quota.Usage{CPU: 16, GB: 24}, nil)
	h, _ := tr.Headroom()
	g.Expect(quota.FormatHeadroom(h)).To(Equal("24 vCPU / unknown GB"))
	g.Expect(quota.FormatHeadroom(quota.Usage{CPU: 0, GB: -2})).To(Equal("0 vCPU / -2 GB"))
}

func TestConfiguredLimitGivesHeadroom(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{CPU: 40, GB: 40})
	tr.Observe(quota.Usage{CPU: 16, GB: 24}, map[string]bool{"cp": true}) // two S control-plane nodes
	h, known := tr.Headroom()
	g.Expect(known).To(BeTrue())
	g.Expect(h).To(Equal(quota.Usage{CPU: 24, GB: 16}))
	g.Expect(quota.Usage{CPU: 10, GB: 16}.FitsIn(h)).To(BeTrue(), "M fits exactly")
	g.Expect(quota.Usage{CPU: 12, GB: 24}.FitsIn(h)).To(BeFalse(), "L does not")
}

func TestLearnedLimitExpiresAndConfiguredWins(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{CPU: 100})
	tr.Learn("RAM", 40.0)
	tr.Learn("CPU", 20)
	g.Expect(tr.Limit()).To(Equal(quota.Limit{CPU: 100, GB: 40}))
	clk.Step(quota.LearnedLimitTTL + time.Second)
	g.Expect(tr.Limit()).To(Equal(quota.Limit{CPU: 100}), "a learned limit is retried after its TTL, a quota raise is then seen")
}

func TestAdmitIsAtomicUnderConcurrency(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{CPU: 40, GB: 40})
	tr.Observe(quota.Usage{CPU: 16, GB: 24}, nil)
	// 20 concurrent 2XS launches (4 vCPU / 4 GB): 16 GB of headroom admits exactly 4.
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for i := range 20 {
		wg.Go(func() {
			if ok, _ := tr.Admit(fmt.Sprintf("g%d", i), quota.Usage{CPU: 4, GB: 4}); ok {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	g.Expect(admitted).To(Equal(4))
	h, _ := tr.Headroom()
	g.Expect(h).To(Equal(quota.Usage{CPU: 8, GB: 0}))
}

func TestReservationsEndWhenCountedReleasedOrStale(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{CPU: 40, GB: 40})
	tr.Observe(quota.Usage{}, nil)
	ok, _ := tr.Admit("a", quota.Usage{CPU: 8, GB: 12})
	g.Expect(ok).To(BeTrue())
	ok, _ = tr.Admit("b", quota.Usage{CPU: 8, GB: 12})
	g.Expect(ok).To(BeTrue())
	ok, _ = tr.Admit("c", quota.Usage{CPU: 8, GB: 12})
	g.Expect(ok).To(BeTrue())
	ok, h := tr.Admit("d", quota.Usage{CPU: 8, GB: 12})
	g.Expect(ok).To(BeFalse())
	g.Expect(h).To(Equal(quota.Usage{CPU: 16, GB: 4}))

	// "a" shows up in the cluster's count: counted once, not twice.
	tr.Observe(quota.Usage{CPU: 8, GB: 12}, map[string]bool{"a": true})
	h, _ = tr.Headroom()
	g.Expect(h).To(Equal(quota.Usage{CPU: 16, GB: 4}))
	ok, _ = tr.Admit("a", quota.Usage{CPU: 8, GB: 12})
	g.Expect(ok).To(BeTrue(), "a retried launch of a counted group is not charged again")

	tr.Release("b")
	h, _ = tr.Headroom()
	g.Expect(h).To(Equal(quota.Usage{CPU: 24, GB: 16}))

	clk.Step(quota.ReservationTTL + time.Second)
	h, _ = tr.Headroom()
	g.Expect(h).To(Equal(quota.Usage{CPU: 32, GB: 28}), "a stale reservation stops holding headroom")
}

func TestBeyondTheSureLimitAProbeFliesAlone(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{})
	observeProven(tr, controlPlane)
	m := quota.Usage{CPU: 10, GB: 16}
	try := func(name string, u quota.Usage) quota.Admission { a, _ := tr.Try(name, u); return a }

	g.Expect(try("first", m)).To(Equal(quota.Admitted), "fits CKE's default quota: admitted")
	g.Expect(try("p1", m)).To(Equal(quota.Busy), "beyond the default: a probe, which waits for the launches in flight")
	changed := tr.Changed()
	tr.Accepted("first")
	g.Expect(changed).To(BeClosed(), "a verdict wakes the launches that wait")
	g.Expect(try("p1", m)).To(Equal(quota.Admitted), "alone: the probe flies")
	g.Expect(try("p2", m)).To(Equal(quota.Busy), "one probe at a time")
	g.Expect(try("small", quota.Usage{CPU: 1, GB: 1})).To(Equal(quota.Busy), "nothing flies beside a probe: the engine would judge them together")
	_, known := tr.Headroom()
	g.Expect(known).To(BeFalse(), "an unknown limit hides no flavor")

	// Each accepted probe proves room: the next is sure up to the proven use only.
	tr.Accepted("p1")
	g.Expect(try("p2", m)).To(Equal(quota.Admitted))
	tr.Accepted("p2")
	g.Expect(tr.Proven()).To(Equal(quota.Usage{CPU: 46, GB: 72}))

	// A known limit is never probed.
	tr.Learn("RAM", 80)
	g.Expect(try("fits", quota.Usage{GB: 8})).To(Equal(quota.Admitted), "exactly the known headroom")
	g.Expect(try("beyond", quota.Usage{GB: 1})).To(Equal(quota.NoRoom))
}

// Sizes of CKE's flavors in quota terms.
var (
	f2XS = quota.Usage{CPU: 4, GB: 4}
	fXS  = quota.Usage{CPU: 6, GB: 8}
	fS   = quota.Usage{CPU: 8, GB: 12}
	fM   = quota.Usage{CPU: 10, GB: 16}
	fL   = quota.Usage{CPU: 12, GB: 24}
	fXL  = quota.Usage{CPU: 16, GB: 32}
	// controlPlane is two S control-plane nodes.
	controlPlane = quota.Usage{CPU: 16, GB: 24}
)

func observeProven(tr *quota.Tracker, u quota.Usage) {
	tr.Record(quota.Observation{Usage: u, Proven: u, Groups: map[string]quota.Group{}})
}

// refusedXL is a tracker that has just seen its XL probe refused, on CKE's default quota with
// only the control plane running.
func refusedXL(g Gomega) (*quota.Tracker, *clocktesting.FakeClock, quota.Refusal) {
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{})
	observeProven(tr, controlPlane)
	a, _ := tr.Try("xl", fXL)
	g.Expect(a).To(Equal(quota.Admitted), "the XL is a probe")
	return tr, clk, tr.Refused("xl", fXL)
}

func TestARefusalRulesOutEveryUseAtLeastAsLarge(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{})
	observeProven(tr, controlPlane)

	ok, _ := tr.Admit("xl", fXL)
	g.Expect(ok).To(BeTrue(), "beyond CKE's default: the probe")
	r := tr.Refused("xl", fXL)
	g.Expect(r.Point).To(Equal(quota.Usage{CPU: 32, GB: 56}))
	g.Expect(r.Resource).To(BeEmpty(), "neither resource is proven to fit: nothing is pinned")
	g.Expect(r.Limit).To(Equal(quota.Limit{}))
	g.Expect(r.For).To(Equal(quota.RefusalTTL))

	// The engine may hold the refused XL's reservation for minutes: everything waits.
	g.Expect(tr.Blocked(f2XS)).To(BeTrue(), "the suspected leak and a 2XS reach the refused use")
	clk.Step(quota.LeakTTL - time.Second)
	observeProven(tr, controlPlane)
	g.Expect(tr.Blocked(fXL)).To(BeTrue(), "the refused use is ruled out while its own leak may hold")
	clk.Step(time.Second)
	observeProven(tr, controlPlane)
	g.Expect(tr.Blocked(fXL)).To(BeFalse(), "the refused use is forgotten with its leak: a freed quota is found by the next probe")
	g.Expect(tr.Blocked(fL)).To(BeFalse(), "28 vCPU / 48 GB is below the refused use in vCPU: a probe may tell")
	g.Expect(tr.Blocked(fM)).To(BeFalse())
	a, _ := tr.Try("m", fM)
	g.Expect(a).To(Equal(quota.Admitted), "within CKE's default, which no refusal contradicts: sure")
	tr.Release("m")

	// The bound expires: a raised quota is then found by one more probe.
	clk.Step(quota.RefusalTTL)
	observeProven(tr, controlPlane)
	g.Expect(tr.Blocked(fXL)).To(BeFalse())
}

// The loop the tracker must not fall into: demand beyond a limit below CKE's default, leaks on.
// The same refused use is probed again once its own leak may be gone, never sooner (G2: at most
// MaxProbeRefusalsPerHour in any hour), and never later (G1: a quota freed meanwhile is found
// within UptakeBound).
func TestReprobingTheSameLimitWaitsOutItsLeakAndNoMore(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{})
	observeProven(tr, controlPlane)
	var at []time.Time
	for i := range 8 {
		// Wait until the S may be tried again, then try it: the engine refuses it every time.
		for tr.Blocked(fS) {
			clk.Step(time.Second)
			observeProven(tr, controlPlane)
		}
		name := fmt.Sprintf("s%d", i)
		a, _ := tr.Try(name, fS)
		g.Expect(a).To(Equal(quota.Admitted))
		r := tr.Refused(name, fS)
		g.Expect(r.For).To(Equal(quota.RefusalMemory))
		at = append(at, clk.Now())
	}
	for i := 1; i < len(at); i++ {
		gap := at[i].Sub(at[i-1])
		g.Expect(gap).To(BeNumerically(">=", quota.LeakLifetime), "probe %d flew into its predecessor's leak", i)
		g.Expect(gap).To(BeNumerically("<=", quota.LeakLifetime+time.Second), "probe %d waited longer than the leak", i)
	}
	for i := range at {
		n := 0
		for _, t2 := range at[i:] {
			if t2.Sub(at[i]) < time.Hour {
				n++
			}
		}
		g.Expect(n).To(BeNumerically("<=", quota.MaxProbeRefusalsPerHour), "refused probes in the hour from probe %d", i)
	}
	g.Expect(quota.MaxProbeRefusalsPerHour).To(BeNumerically("<=", 6))
	g.Expect(quota.UptakeBound).To(BeNumerically("<=", 11*time.Minute))
}

// A configured limit wins at once: refusals it says fit are forgotten when it is set, and a
// refusal within it is reported, not remembered.
func TestAConfiguredLimitWins(t *testing.T) {
	g := NewWithT(t)
	tr, clk, r := refusedXL(g)
	g.Expect(r.Misconfigured).To(BeFalse())
	clk.Step(quota.LeakTTL - time.Second)
	observeProven(tr, controlPlane)
	g.Expect(tr.Blocked(fXL)).To(BeTrue(), "the refused use is remembered")

	tr.SetConfigured(quota.Limit{CPU: 100, GB: 100})
	g.Expect(tr.Blocked(fXL)).To(BeFalse(), "the configured limit says the XL fits")
	a, _ := tr.Try("xl2", fXL)
	g.Expect(a).To(Equal(quota.Admitted))
	a, _ = tr.Try("s", fS)
	g.Expect(a).To(Equal(quota.Admitted), "within a configured limit launches fly together")
	r = tr.Refused("xl2", fXL)
	g.Expect(r.Misconfigured).To(BeTrue())
	g.Expect(r.For).To(BeZero())
	clk.Step(quota.LeakTTL)
	observeProven(tr, controlPlane)
	g.Expect(tr.Blocked(fXL)).To(BeFalse(), "a refusal within the configured limit is not remembered")
}

// Before any verdict proves room, CKE's default is an assumption: launches on it fly at most
// AssumedInFlight at a time, and once proven, together.
func TestAFirstBatchOnTheAssumedDefaultFliesAFewAtATime(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{})
	observeProven(tr, controlPlane)
	two := quota.Usage{CPU: 2, GB: 2}
	var admitted []string
	for i := range 5 {
		name := fmt.Sprintf("n%d", i)
		if a, _ := tr.Try(name, two); a == quota.Admitted {
			admitted = append(admitted, name)
		} else {
			g.Expect(a).To(Equal(quota.Busy))
		}
	}
	g.Expect(admitted).To(HaveLen(quota.AssumedInFlight))
	for _, n := range admitted {
		tr.Accepted(n)
	}
	a, _ := tr.Try("n9", two)
	g.Expect(a).To(Equal(quota.Admitted), "the next round flies once the verdicts are in")

	// A configured limit is not an assumption.
	tc := quota.NewTracker(clk, quota.Limit{CPU: 40, GB: 40})
	observeProven(tc, controlPlane)
	for i := range 5 {
		a, _ := tc.Try(fmt.Sprintf("c%d", i), two)
		g.Expect(a).To(Equal(quota.Admitted))
	}
}

// A raised quota: 100 / 100, 80 / 80 proven. A refused XL (96 / 112) rules out nothing a
// smaller flavor needs: the headroom is not pinned at zero.
func TestARaisedQuotaSurvivesARefusal(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{})
	observeProven(tr, quota.Usage{CPU: 80, GB: 80})
	a, _ := tr.Try("xl", fXL)
	g.Expect(a).To(Equal(quota.Admitted), "a probe")
	tr.Refused("xl", fXL)
	clk.Step(quota.LeakTTL)
	observeProven(tr, quota.Usage{CPU: 80, GB: 80})
	h, _ := tr.Headroom()
	g.Expect(fM.FitsIn(h)).To(BeTrue(), "the headroom is not pinned at the proven use")
	g.Expect(tr.Blocked(fM)).To(BeFalse())
	a, _ = tr.Try("m", fM)
	g.Expect(a).To(Equal(quota.Admitted), "an M (90 / 96) is probed")
	tr.Accepted("m")
	g.Expect(tr.Proven()).To(Equal(quota.Usage{CPU: 90, GB: 96}))
}

func TestARefusalBelowTheDefaultIsRememberedAndContradictsIt(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{})
	observeProven(tr, controlPlane)
	ok, _ := tr.Admit("s", fS)
	g.Expect(ok).To(BeTrue(), "within CKE's default")
	// The organisation has 32 GB (another cluster uses the rest): 24 + 12 is refused.
	r := tr.Refused("s", fS)
	g.Expect(r.Point).To(Equal(quota.Usage{CPU: 24, GB: 36}))
	clk.Step(quota.LeakTTL - time.Second)
	observeProven(tr, controlPlane)
	g.Expect(tr.Blocked(fS)).To(BeTrue())
	g.Expect(tr.Blocked(f2XS)).To(BeTrue(), "its leak may still hold")
	clk.Step(time.Second)
	observeProven(tr, controlPlane)
	a, _ := tr.Try("2xs", f2XS)
	g.Expect(a).To(Equal(quota.Admitted))
	a, _ = tr.Try("2xs-b", f2XS)
	g.Expect(a).To(Equal(quota.Busy), "the default is contradicted: beyond the proven use, one probe at a time")
	tr.Accepted("2xs")
	// Long after the refusal is forgotten, the default is still doubted: launches beyond the
	// proven use go one at a time, so no batch is refused together again.
	clk.Step(quota.DefaultDoubtTTL - quota.LeakTTL - time.Minute)
	observeProven(tr, controlPlane.Add(f2XS))
	a, _ = tr.Try("s2", fS)
	g.Expect(a).To(Equal(quota.Admitted), "a probe")
	a, _ = tr.Try("2xs-c", f2XS)
	g.Expect(a).To(Equal(quota.Busy), "beside a probe, nothing flies")
}

func TestARefusalPinsTheResourceAProofLeavesOpen(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{})
	// 48 vCPU were accepted a moment ago (a raised CPU quota), since scaled down.
	observeProven(tr, quota.Usage{CPU: 48, GB: 30})
	observeProven(tr, controlPlane)
	g.Expect(tr.Proven()).To(Equal(quota.Usage{CPU: 48, GB: 30}))
	ok, _ := tr.Admit("m", fM)
	g.Expect(ok).To(BeTrue())
	r := tr.Refused("m", fM)
	// 26 vCPU are proven to fit: the refusal can only be the memory's, 40 GB > limit.
	g.Expect(r.Point).To(Equal(quota.Usage{CPU: 26, GB: 40}))
	g.Expect(r.Limit).To(Equal(quota.Limit{GB: 39}))
	g.Expect(r.Resource).To(Equal("RAM"))
}

func TestARefusalTheProvenUseContradictsRetiresTheProofs(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{})
	observeProven(tr, quota.Usage{CPU: 40, GB: 40}) // accepted a moment ago
	observeProven(tr, controlPlane)                 // since scaled down
	ok, _ := tr.Admit("2xs", f2XS)
	g.Expect(ok).To(BeTrue())
	// 20 vCPU / 28 GB refused though 40 / 40 was accepted: the quota was lowered since, or a
	// reservation leaked upstream. Either way, launching on the old proof would only cycle
	// create → reject → delete (and leak more): nothing is proven until the next acceptance.
	r := tr.Refused("2xs", f2XS)
	g.Expect(tr.Proven()).To(BeZero(), "what still runs proves nothing of a lowered quota: the engine never takes it back")
	g.Expect(r.Point).To(Equal(quota.Usage{CPU: 20, GB: 28}))
	g.Expect(tr.Blocked(f2XS)).To(BeTrue(), "the same use is not tried again")
}

func TestAGroupDeletedWhileBeingBuiltIsChargedWhileItsReservationLeaks(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{CPU: 40, GB: 40})
	with := func(gr quota.Group) quota.Observation {
		return quota.Observation{Usage: controlPlane.Add(gr.Size), Proven: controlPlane.Add(gr.Size), Groups: map[string]quota.Group{"m": gr}}
	}
	tr.Record(with(quota.Group{State: quota.GroupCreating, Size: fM, Deleting: true}))
	tr.Record(quota.Observation{Usage: controlPlane, Proven: controlPlane}) // gone
	h, _ := tr.Headroom()
	g.Expect(h).To(Equal(quota.Usage{CPU: 14, GB: 0}), "the engine still charges it")
	clk.Step(quota.LeakTTL)
	h, _ = tr.Headroom()
	g.Expect(h).To(Equal(quota.Usage{CPU: 24, GB: 16}))

	// A built group deleted leaks nothing.
	tr.Record(with(quota.Group{State: quota.GroupBuilt, Size: fM, Deleting: true}))
	tr.Record(quota.Observation{Usage: controlPlane, Proven: controlPlane})
	h, _ = tr.Headroom()
	g.Expect(h).To(Equal(quota.Usage{CPU: 24, GB: 16}))
}

func TestConcurrentRefusalsAreJudgedTogether(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{})
	observeProven(tr, controlPlane)
	for _, name := range []string{"a", "b"} {
		ok, _ := tr.Admit(name, fXS)
		g.Expect(ok).To(BeTrue())
	}
	// The engine judged a and b together (28 vCPU / 40 GB) and refused both.
	ra := tr.Refused("a", fXS)
	rb := tr.Refused("b", fXS)
	g.Expect(ra.Point).To(Equal(quota.Usage{CPU: 28, GB: 40}))
	g.Expect(rb.Point).To(Equal(quota.Usage{CPU: 28, GB: 40}), "b was judged with a, though a's refusal came first")
	g.Expect(tr.Blocked(fXS)).To(BeTrue(), "with their suspected leaks, another XS reaches the refused use")
}

func TestARefusedGroupIsNeverChargedAfterItsRefusal(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{})
	observeProven(tr, controlPlane)
	ok, _ := tr.Admit("xl", fXL)
	g.Expect(ok).To(BeTrue())
	// The cache saw the group before its verdict: charged, reservation ended.
	pending := quota.Observation{Usage: controlPlane.Add(fXL), Proven: controlPlane, Groups: map[string]quota.Group{"xl": {State: quota.GroupCharged, Size: fXL}}}
	tr.Record(pending)
	tr.Refused("xl", fXL)
	tr.Release("xl") // Create's deferred release: harmless
	h, known := tr.ProvisionalHeadroom()
	g.Expect(known).To(BeTrue())
	g.Expect(h).To(Equal(quota.Usage{CPU: 8, GB: -16}), "never 40 − 88: the refused group holds nothing beyond its suspected leak")

	// A stale count (or a terminating refused group counted as live) does not charge it again.
	tr.Record(quota.Observation{Usage: controlPlane.Add(fXL), Proven: controlPlane, Groups: map[string]quota.Group{"xl": {State: quota.GroupCharged, Size: fXL}}})
	h, _ = tr.ProvisionalHeadroom()
	g.Expect(h).To(Equal(quota.Usage{CPU: 8, GB: -16}))
	tr.Record(quota.Observation{Usage: controlPlane, Proven: controlPlane, Groups: map[string]quota.Group{"xl": {State: quota.GroupUncharged, Size: fXL}}})
	h, _ = tr.ProvisionalHeadroom()
	g.Expect(h).To(Equal(quota.Usage{CPU: 8, GB: -16}))
}

// Create may stop waiting for a verdict (the acceptance timeout): the count showing the group
// accepted ends the probe, so the launches behind it do not wait for reservationTTL.
func TestACountedAcceptanceEndsAProbe(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{})
	observeProven(tr, quota.Usage{CPU: 40, GB: 40})
	a, _ := tr.Try("probe", f2XS)
	g.Expect(a).To(Equal(quota.Admitted))
	a, _ = tr.Try("next", f2XS)
	g.Expect(a).To(Equal(quota.Busy))
	used := quota.Usage{CPU: 44, GB: 44}
	tr.Record(quota.Observation{Usage: used, Proven: used, Groups: map[string]quota.Group{"probe": {State: quota.GroupCreating, Size: f2XS}}})
	g.Expect(tr.ProbesInFlight()).To(BeZero())
	a, _ = tr.Try("next", f2XS)
	g.Expect(a).To(Equal(quota.Admitted))
}

// What a restart or a new leader must not forget comes back from a snapshot, each memory until
// its own end, never longer; a configured limit still wins over what was restored.
func TestASnapshotRestoresEveryMemoryUntilItsEnd(t *testing.T) {
	g := NewWithT(t)
	tr, clk, _ := refusedXL(g)
	clk.Step(time.Minute)
	raw, err := json.Marshal(tr.Snapshot())
	g.Expect(err).NotTo(HaveOccurred())
	var s quota.Snapshot
	g.Expect(json.Unmarshal(raw, &s)).To(Succeed())
	g.Expect(s.Refused).To(HaveLen(1))
	g.Expect(s.Leaks).To(HaveLen(1))
	g.Expect(s.Summary()).To(ContainSubstring("next probe"))

	// The new leader: launches wait for the restore, then nothing probes into the leak.
	next := quota.NewTracker(clk, quota.Limit{})
	next.AwaitRestore()
	observeProven(next, controlPlane)
	a, _ := next.Try("2xs", f2XS)
	g.Expect(a).To(Equal(quota.Busy), "launches wait for the saved state")
	next.Restore(s)
	next.Restore(s) // twice is harmless
	g.Expect(next.Blocked(fXL)).To(BeTrue())
	g.Expect(next.Blocked(f2XS)).To(BeTrue(), "the refused XL's leak may still hold: no probe into it")
	clk.Step(quota.LeakTTL - time.Minute - time.Second)
	observeProven(next, controlPlane)
	g.Expect(next.Blocked(f2XS)).To(BeTrue())
	clk.Step(time.Second)
	observeProven(next, controlPlane)
	g.Expect(next.Blocked(fXL)).To(BeFalse(), "restored memories end when they would have: no lockout longer than before")
	g.Expect(next.Snapshot().Refused).To(BeEmpty())

	// A configured limit wins over a restored refusal.
	configured := quota.NewTracker(clk, quota.Limit{CPU: 100, GB: 100})
	configured.Restore(quota.Snapshot{Refused: []quota.Remembered{{Use: quota.Usage{CPU: 32, GB: 56}, Until: clk.Now().Add(time.Minute)}}})
	g.Expect(configured.Snapshot().Refused).To(BeEmpty())
}

// With only the CPU limit configured, a refusal within it may be the memory's: it is
// remembered, not reported as a misconfiguration.
func TestAPartlyConfiguredLimitStillRemembersRefusals(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{CPU: 100})
	observeProven(tr, controlPlane)
	a, _ := tr.Try("xl", fXL)
	g.Expect(a).To(Equal(quota.Admitted))
	r := tr.Refused("xl", fXL)
	g.Expect(r.Misconfigured).To(BeFalse())
	g.Expect(r.For).To(Equal(quota.RefusalMemory))
}
