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

func TestBeyondTheDefaultQuotaOneProbeAtATime(t *testing.T) {
	g := NewWithT(t)
	tr := quota.NewTracker(clocktesting.NewFakeClock(time.Now()), quota.Limit{})
	tr.Observe(quota.Usage{CPU: 16, GB: 24}, nil) // two S control-plane nodes
	m := quota.Usage{CPU: 10, GB: 16}

	ok, _ := tr.Admit("first", m)
	g.Expect(ok).To(BeTrue(), "fits CKE's default quota: admitted")
	ok, _ = tr.Admit("probe", m)
	g.Expect(ok).To(BeTrue(), "beyond the default quota: admitted as the probe")
	ok, _ = tr.Admit("third", m)
	g.Expect(ok).To(BeFalse(), "a second launch beyond the default waits for the probe's verdict")
	_, known := tr.Headroom()
	g.Expect(known).To(BeFalse(), "a provisional limit hides no flavor")

	// The probe is accepted: the quota was raised, and the proven floor becomes the limit.
	tr.Accepted("probe")
	ok, _ = tr.Admit("third", m)
	g.Expect(ok).To(BeTrue(), "the next launch beyond is the new probe")
	ok, _ = tr.Admit("fourth", quota.Usage{CPU: 4, GB: 4})
	g.Expect(ok).To(BeFalse())

	// The new probe is refused: the limit is learned and now constrains.
	tr.Release("third")
	tr.Learn("RAM", 64)
	h, known := tr.Headroom()
	g.Expect(known).To(BeTrue())
	g.Expect(h.GB).To(Equal(int64(64 - 24 - 16 - 16)))
	ok, _ = tr.Admit("fifth", quota.Usage{CPU: 4, GB: 4})
	g.Expect(ok).To(BeTrue())
	ok, _ = tr.Admit("sixth", quota.Usage{CPU: 4, GB: 8})
	g.Expect(ok).To(BeFalse(), "a known limit is never probed")
}
