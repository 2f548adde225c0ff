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
