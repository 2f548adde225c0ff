package quota_test

import (
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

func TestBeyondTheDefaultQuotaProbesWidenWithEachAcceptance(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{})
	tr.Observe(quota.Usage{CPU: 16, GB: 24}, nil) // two S control-plane nodes
	m := quota.Usage{CPU: 10, GB: 16}
	admit := func(name string, u quota.Usage) bool { ok, _ := tr.Admit(name, u); return ok }

	g.Expect(admit("first", m)).To(BeTrue(), "fits CKE's default quota: admitted")
	g.Expect(admit("p1", m)).To(BeTrue(), "beyond the default quota: admitted as the probe")
	g.Expect(admit("wait", m)).To(BeFalse(), "a second launch beyond the default waits for the first probe's verdict")
	_, known := tr.Headroom()
	g.Expect(known).To(BeFalse(), "a provisional limit hides no flavor")

	// Each accepted probe proves room and lets one more fly: 1, 2, 4 in flight per round.
	tr.Accepted("p1")
	g.Expect(admit("p2", m)).To(BeTrue())
	g.Expect(admit("p3", m)).To(BeTrue())
	g.Expect(admit("wait", m)).To(BeFalse(), "a window of two")
	tr.Accepted("p2")
	// p3 is still in flight: the floor counts only what was accepted, so the provisional
	// limit did not swallow p3 and the window (now 3) has two free slots.
	g.Expect(admit("p4", m)).To(BeTrue())
	g.Expect(admit("p5", m)).To(BeTrue())
	g.Expect(admit("wait", m)).To(BeFalse(), "p3, p4, p5 fill a window of three")
	tr.Accepted("p3")
	g.Expect(admit("p6", m)).To(BeTrue())
	g.Expect(admit("p7", m)).To(BeTrue())
	g.Expect(admit("wait", m)).To(BeFalse(), "p4 to p7 fill a window of four")

	// A probe is refused: the limit is learned, the window closes, and only the known
	// headroom counts from then on.
	tr.Release("p4")
	tr.Learn("RAM", 128)
	tr.Release("p5")
	tr.Release("p6")
	tr.Release("p7")
	h, known := tr.Headroom()
	g.Expect(known).To(BeTrue())
	g.Expect(h.GB).To(Equal(int64(128-24-4*16)), "control plane, first and p1–p3")
	// (No vCPU asked: the CPU limit is still provisional, this is about the learned GB.)
	g.Expect(admit("fits", quota.Usage{GB: 40})).To(BeTrue(), "exactly the known headroom")
	g.Expect(admit("beyond", quota.Usage{GB: 1})).To(BeFalse(), "a known limit is never probed, though the window is free")

	// Once the learned limit expires, probing starts again from a window of one.
	clk := clocktesting.NewFakeClock(time.Now())
	tr = quota.NewTracker(clk, quota.Limit{})
	tr.Observe(quota.Usage{CPU: 40, GB: 40}, nil)
	tr.Learn("CPU", 40)
	clk.Step(quota.LearnedLimitTTL + time.Second)
	g.Expect(admit("again", m)).To(BeTrue())
	g.Expect(admit("wait", m)).To(BeFalse(), "one probe after the limit expired")
}

func TestProbeWindowIsBounded(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{})
	tr.Observe(quota.Usage{CPU: 40, GB: 40}, nil) // the default quota is used up
	xs := quota.Usage{CPU: 1, GB: 1}
	for i := range 4 * quota.MaxProbeWindow {
		name := fmt.Sprintf("a%d", i)
		ok, _ := tr.Admit(name, xs)
		g.Expect(ok).To(BeTrue(), "probe %d", i)
		tr.Accepted(name)
	}
	inFlight := 0
	for i := range 4 * quota.MaxProbeWindow {
		if ok, _ := tr.Admit(fmt.Sprintf("b%d", i), xs); ok {
			inFlight++
		}
	}
	g.Expect(inFlight).To(Equal(quota.MaxProbeWindow), "at most MaxProbeWindow can be refused at once")
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

func TestARefusalWithoutMessageInfersTheDefaultQuota(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{})
	observeProven(tr, controlPlane)

	ok, _ := tr.Admit("xl", fXL)
	g.Expect(ok).To(BeTrue(), "beyond CKE's default: the probe")
	r := tr.Refused("xl", fXL)
	g.Expect(r.Point).To(Equal(quota.Usage{CPU: 32, GB: 56}))
	g.Expect(r.Resource).To(Equal("RAM"), "the default quota explains the refusal by its memory")
	g.Expect(r.Limit).To(Equal(quota.Limit{CPU: 40, GB: 40}))
	g.Expect(r.Explained).To(BeTrue())

	h, known := tr.Headroom()
	g.Expect(known).To(BeTrue(), "a remembered refusal puts the estimate in force: flavors beyond it are hidden")
	g.Expect(h).To(Equal(quota.Usage{CPU: 24, GB: 16}))
	ok, _ = tr.Admit("l", fL)
	g.Expect(ok).To(BeFalse(), "no second probe beyond the estimate")
	ok, _ = tr.Admit("m", fM)
	g.Expect(ok).To(BeTrue())

	// The bound expires: a raised quota is then found by one more probe.
	tr.Release("m")
	clk.Step(quota.LearnedLimitTTL + time.Second)
	observeProven(tr, controlPlane)
	g.Expect(tr.Limit()).To(Equal(quota.Limit{}))
	ok, _ = tr.Admit("xl-again", fXL)
	g.Expect(ok).To(BeTrue())
}

func TestARefusalBelowTheDefaultLowersTheEstimateBriefly(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	tr := quota.NewTracker(clk, quota.Limit{})
	observeProven(tr, controlPlane)
	ok, _ := tr.Admit("s", fS)
	g.Expect(ok).To(BeTrue(), "within CKE's default")
	// The organisation has 36 GB (another cluster uses the rest): 24 + 12 is refused.
	r := tr.Refused("s", fS)
	g.Expect(r.Point).To(Equal(quota.Usage{CPU: 24, GB: 36}))
	g.Expect(r.Limit).To(Equal(quota.Limit{CPU: 40, GB: 35}), "memory, exceeded the most relative to the estimate, is lowered")
	g.Expect(r.Resource).To(Equal("RAM"))
	ok, _ = tr.Admit("s2", fS)
	g.Expect(ok).To(BeFalse())
	ok, _ = tr.Admit("2xs", f2XS)
	g.Expect(ok).To(BeTrue())
	tr.Release("2xs")

	// A refusal below CKE's default may be a reservation the engine leaked: trusted briefly.
	clk.Step(quota.LowRefusalTTL + time.Second)
	g.Expect(tr.Limit()).To(Equal(quota.Limit{}))
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
	g.Expect(r.Limit).To(Equal(quota.Limit{CPU: 48, GB: 39}))
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
	// create → reject → delete (and leak more): what runs now is all that is still proven.
	r := tr.Refused("2xs", f2XS)
	g.Expect(r.Explained).To(BeTrue())
	g.Expect(tr.Proven()).To(Equal(controlPlane))
	g.Expect(r.Limit).To(Equal(quota.Limit{CPU: 40, GB: 27}))
	g.Expect(r.Resource).To(Equal("RAM"))
	// Below CKE's default, the refusal is trusted briefly: a leak costs minutes, not more.
	clk.Step(quota.LowRefusalTTL + time.Second)
	g.Expect(tr.Limit()).To(Equal(quota.Limit{}))
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
	g.Expect(tr.Limit()).To(Equal(quota.Limit{CPU: 40, GB: 39}), "not 31 GB: b alone (32 GB) was never proven to overflow")
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
	h, known := tr.Headroom()
	g.Expect(known).To(BeTrue())
	g.Expect(h).To(Equal(quota.Usage{CPU: 24, GB: 16}), "never 40 − 56: the refused group holds nothing")

	// A stale count (or a terminating refused group counted as live) does not charge it again.
	tr.Record(quota.Observation{Usage: controlPlane.Add(fXL), Proven: controlPlane, Groups: map[string]quota.Group{"xl": {State: quota.GroupCharged, Size: fXL}}})
	h, _ = tr.Headroom()
	g.Expect(h).To(Equal(quota.Usage{CPU: 24, GB: 16}))
	tr.Record(quota.Observation{Usage: controlPlane, Proven: controlPlane, Groups: map[string]quota.Group{"xl": {State: quota.GroupUncharged, Size: fXL}}})
	h, _ = tr.Headroom()
	g.Expect(h).To(Equal(quota.Usage{CPU: 24, GB: 16}))
}

// engine plays CKE's quota engine for the tracker: launches are judged one by one against the
// limit, and the cluster's count follows.
type engine struct {
	limit    quota.Usage
	used     quota.Usage
	refusals int
	launches int
}

// run asks for n launches of size u, round after round: every launch the tracker admits is
// judged, then the cluster is recounted. It returns how many were accepted.
func (e *engine) run(tr *quota.Tracker, n int, u quota.Usage) int {
	accepted := 0
	for round := 0; round < 4*n && accepted < n; round++ {
		var admitted []string
		for i := accepted; i < n; i++ {
			e.launches++
			name := fmt.Sprintf("g%d", e.launches)
			if ok, _ := tr.Admit(name, u); ok {
				admitted = append(admitted, name)
			}
		}
		if len(admitted) == 0 {
			break
		}
		for _, name := range admitted {
			if e.used.Add(u).FitsIn(e.limit) {
				e.used = e.used.Add(u)
				accepted++
				tr.Accepted(name)
			} else {
				e.refusals++
				tr.Refused(name, u)
			}
		}
		observeProven(tr, e.used)
	}
	return accepted
}

func TestTheQuotaIsInferredFromVerdictsAlone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limit    quota.Usage
		size     quota.Usage
		demand   int
		want     int
		refusals int // at most
	}{
		// CKE's default quota: the one probe beyond it is the one refusal.
		{"default quota, 2XS", quota.Usage{CPU: 40, GB: 40}, f2XS, 30, 4, 1},
		{"default quota, M", quota.Usage{CPU: 40, GB: 40}, fM, 30, 1, 1},
		{"default quota, XL", quota.Usage{CPU: 40, GB: 40}, fXL, 30, 0, 1},
		// A raised quota the demand fits: climbed by probes, never refused.
		{"raised quota, demand fits", quota.Usage{CPU: 100, GB: 100}, f2XS, 19, 19, 0},
		{"raised quota, demand fits, XS", quota.Usage{CPU: 80, GB: 80}, fXS, 7, 7, 0},
		// Demand beyond a raised quota: what is in flight beyond it when it is reached is
		// refused, at most the probe window.
		{"raised quota, demand beyond", quota.Usage{CPU: 100, GB: 100}, f2XS, 30, 19, quota.MaxProbeWindow},
		{"raised CPU only", quota.Usage{CPU: 100, GB: 40}, f2XS, 30, 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{})
			e := &engine{limit: tc.limit, used: controlPlane}
			observeProven(tr, e.used)
			g.Expect(e.run(tr, tc.demand, tc.size)).To(Equal(tc.want), "every node the quota holds is launched")
			g.Expect(e.refusals).To(BeNumerically("<=", tc.refusals))
			if e.refusals == 0 {
				return
			}
			// Demand keeps coming after the limit was inferred: no further refusal while the
			// bounds hold.
			before := e.refusals
			e.run(tr, 5, tc.size)
			g.Expect(e.refusals).To(Equal(before))
		})
	}
}
