package quotaengine

import (
	"testing"
	"time"
)

var (
	t0 = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	// The flavors the tests ask for, and CKE's default control plane (2 × S).
	m            = Usage{CPU: 10, GB: 16}
	xs2          = Usage{CPU: 4, GB: 4}
	controlPlane = Usage{CPU: 16, GB: 24}
)

func at(d time.Duration) time.Time { return t0.Add(d) }

// live is CKE's default quota and the live profile's timings.
func live(mutate ...func(*Options)) *Engine {
	o := Options{Limit: Usage{CPU: 40, GB: 40}, BatchWindow: time.Second, DecisionDelay: time.Second, LeakTTL: 3 * time.Minute}
	for _, f := range mutate {
		f(&o)
	}
	e := New(o)
	e.Hold("control-plane", controlPlane, t0)
	return e
}

// verdict fails unless name is decided at now as want says.
func verdict(t *testing.T, e *Engine, name string, now time.Time, accepted bool) Decision {
	t.Helper()
	d, ok := e.Decide(name, now)
	if !ok {
		t.Fatalf("%s: not decided at %s (due %s)", name, now.Sub(t0), d.At.Sub(t0))
	}
	if d.Accepted != accepted {
		t.Fatalf("%s: accepted %v at %s, want %v", name, d.Accepted, now.Sub(t0), accepted)
	}
	return d
}

func held(t *testing.T, e *Engine, now time.Time, want Usage) {
	t.Helper()
	if got := e.Held(now); got != want {
		t.Fatalf("held at %s = %+v, want %+v", now.Sub(t0), got, want)
	}
}

func TestBatchRefusedTogether(t *testing.T) {
	e := live(func(o *Options) { o.LegacyMessage = true })
	// Each M fits alone beside the control plane (40 GB); together they need 56.
	e.Create("a", m, at(0))
	e.Create("b", m, at(500*time.Millisecond))
	if d, ok := e.Decide("a", at(999*time.Millisecond)); ok || !d.At.Equal(at(time.Second)) {
		t.Fatalf("a decided %v early, due %s", ok, d.At.Sub(t0))
	}
	d := verdict(t, e, "a", at(time.Second), false)
	if d.Message != "Quota exceeded: RAM max: limit = 40.0 GB | actual = 56.0 GB" {
		t.Errorf("message %q", d.Message)
	}
	// b's verdict waits for its own decision delay, though the batch was judged with a.
	if d, ok := e.Decide("b", at(time.Second)); ok || !d.At.Equal(at(1500*time.Millisecond)) {
		t.Fatalf("b decided %v at 1s, due %s, want 1.5s", ok, d.At.Sub(t0))
	}
	verdict(t, e, "b", at(1500*time.Millisecond), false)

	// The window closed: a creation after it is judged alone and fits.
	e.Create("c", m, at(1500*time.Millisecond))
	held(t, e, at(2*time.Second), controlPlane)
	verdict(t, e, "c", at(2500*time.Millisecond), true)
	held(t, e, at(3*time.Second), controlPlane.Add(m))
}

func TestBatchAcceptedTogether(t *testing.T) {
	e := live()
	e.Create("a", xs2, at(0))
	e.Create("b", xs2, at(200*time.Millisecond))
	verdict(t, e, "a", at(time.Second), true)
	verdict(t, e, "b", at(1200*time.Millisecond), true)
	held(t, e, at(2*time.Second), controlPlane.Add(xs2.Times(2)))
}

// Without a window each creation is judged alone, in order, seeing the ones before it.
func TestNoWindowJudgesOneByOne(t *testing.T) {
	e := live(func(o *Options) { o.BatchWindow = 0 })
	e.Create("a", m, at(0))
	e.Create("b", m, at(0))
	verdict(t, e, "a", at(time.Second), true)
	verdict(t, e, "b", at(time.Second), false)
}

func TestRefusedCreationLeaksOnDelete(t *testing.T) {
	e := live()
	e.Create("big", m.Times(2), at(0))
	verdict(t, e, "big", at(time.Second), false)
	// Refused and still there: it holds nothing.
	held(t, e, at(2*time.Second), controlPlane)
	e.Delete("big", at(10*time.Second))
	held(t, e, at(10*time.Second), controlPlane.Add(m.Times(2)))
	if l := e.Leaked(at(10 * time.Second)); l != m.Times(2) {
		t.Errorf("leaked %+v", l)
	}
	if next, ok := e.NextEvent(at(10 * time.Second)); !ok || !next.Equal(at(10*time.Second+3*time.Minute)) {
		t.Errorf("next event %v %s, want the leak's expiry", ok, next.Sub(t0))
	}
	// The leak alone refuses what would fit.
	e.Create("small", xs2, at(20*time.Second))
	verdict(t, e, "small", at(21*time.Second), false)
	held(t, e, at(10*time.Second+3*time.Minute-time.Nanosecond), controlPlane.Add(m.Times(2)))
	held(t, e, at(10*time.Second+3*time.Minute), controlPlane)
	if _, ok := e.NextEvent(at(4 * time.Minute)); ok {
		t.Error("an event after every leak expired")
	}
}

func TestDeleteWhileBuildingLeaks(t *testing.T) {
	e := live()
	e.Create("a", m, at(0))
	verdict(t, e, "a", at(time.Second), true)
	e.Delete("a", at(5*time.Second))
	held(t, e, at(5*time.Second), controlPlane.Add(m))
	held(t, e, at(5*time.Second+3*time.Minute), controlPlane)
}

func TestDeleteOnceBuiltGivesBack(t *testing.T) {
	e := live()
	e.Create("a", m, at(0))
	verdict(t, e, "a", at(time.Second), true)
	e.Built("a", at(40*time.Second))
	e.Delete("a", at(50*time.Second))
	held(t, e, at(50*time.Second), controlPlane)
}

// A group deleted before its verdict leaks what it asked for; its batch is judged without
// it but with its leak.
func TestDeleteBeforeDecisionLeaks(t *testing.T) {
	e := live()
	e.Create("a", m, at(0))
	e.Create("b", m, at(100*time.Millisecond))
	e.Delete("a", at(500*time.Millisecond))
	if _, ok := e.Decide("a", at(2*time.Second)); ok {
		t.Error("a deleted group got a verdict")
	}
	verdict(t, e, "b", at(1100*time.Millisecond), false)
	held(t, e, at(2*time.Second), controlPlane.Add(m))

	// Nothing leaks without a TTL: b alone fits.
	e = live(func(o *Options) { o.LeakTTL = 0 })
	e.Create("a", m, at(0))
	e.Create("b", m, at(100*time.Millisecond))
	e.Delete("a", at(500*time.Millisecond))
	verdict(t, e, "b", at(1100*time.Millisecond), true)
}

// A group deleted after the engine judged it but before its verdict was given is still in
// its first reconcile: it leaks too.
func TestDeleteBetweenJudgementAndVerdictLeaks(t *testing.T) {
	e := live()
	e.Create("a", xs2, at(0))
	e.Create("b", xs2, at(900*time.Millisecond))
	e.Delete("b", at(1500*time.Millisecond)) // judged at 1 s, verdict due at 1.9 s
	held(t, e, at(1500*time.Millisecond), controlPlane.Add(xs2.Times(2)))
	held(t, e, at(1500*time.Millisecond+3*time.Minute), controlPlane.Add(xs2))
}

func TestDropLeaksNothing(t *testing.T) {
	e := live()
	e.Create("a", m, at(0))
	verdict(t, e, "a", at(time.Second), true)
	e.Drop("a", at(5*time.Second))
	held(t, e, at(5*time.Second), controlPlane)
}

// Other clusters of the organisation count in every judgement.
func TestOtherClusters(t *testing.T) {
	e := live(func(o *Options) { o.Other = Usage{CPU: 2, GB: 4} })
	held(t, e, at(0), controlPlane.Add(Usage{CPU: 2, GB: 4}))
	e.Create("a", m, at(0)) // 24 + 4 + 16 = 44 GB
	verdict(t, e, "a", at(time.Second), false)
	e.Configure(at(2*time.Second), func(o *Options) { o.Other = Usage{} })
	e.Create("b", m, at(2*time.Second))
	verdict(t, e, "b", at(3*time.Second), true)
}

func TestLimitLoweredAndRaised(t *testing.T) {
	e := live()
	e.Create("a", m, at(0))
	verdict(t, e, "a", at(time.Second), true)
	// Lowered below what is held: nothing is taken back, new creations are refused.
	e.Configure(at(2*time.Second), func(o *Options) { o.Limit = Usage{CPU: 20, GB: 20} })
	held(t, e, at(2*time.Second), controlPlane.Add(m))
	e.Create("b", xs2, at(2*time.Second))
	verdict(t, e, "b", at(3*time.Second), false)
	e.Configure(at(4*time.Second), func(o *Options) { o.Limit = Usage{CPU: 100, GB: 100} })
	e.Create("c", m.Times(3), at(4*time.Second))
	verdict(t, e, "c", at(5*time.Second), true)
}

// A batch due before a change of options is judged under the old ones, however late the
// next call comes.
func TestConfigureAfterADueBatch(t *testing.T) {
	e := live()
	e.Create("a", m.Times(2), at(0))
	e.Configure(at(5*time.Second), func(o *Options) { o.Limit = Usage{CPU: 100, GB: 100} })
	verdict(t, e, "a", at(5*time.Second), false)
}

func TestResize(t *testing.T) {
	e := live(func(o *Options) { o.LegacyMessage = true })
	e.Create("g", xs2, at(0))
	verdict(t, e, "g", at(time.Second), true)
	// 16 + 5 × 4 = 36 vCPU, 24 + 5 × 4 = 44 GB: refused, the running node keeps its charge.
	ok, msg := e.Resize("g", xs2.Times(5), at(10*time.Second))
	if ok || msg != "Quota exceeded: RAM max: limit = 40.0 GB | actual = 44.0 GB" {
		t.Errorf("resize to 5: %v %q", ok, msg)
	}
	held(t, e, at(10*time.Second), controlPlane.Add(xs2))
	if ok, _ := e.Resize("g", xs2.Times(4), at(11*time.Second)); !ok {
		t.Error("resize to 4 (40 GB) refused")
	}
	held(t, e, at(11*time.Second), controlPlane.Add(xs2.Times(4)))
	// Shrinking always goes through, even over a lowered limit.
	e.Configure(at(12*time.Second), func(o *Options) { o.Limit = Usage{CPU: 1, GB: 1} })
	if ok, _ := e.Resize("g", xs2.Times(2), at(12*time.Second)); !ok {
		t.Error("shrinking refused")
	}
	held(t, e, at(12*time.Second), controlPlane.Add(xs2.Times(2)))
	if ok, _ := e.Resize("unknown", xs2, at(13*time.Second)); ok {
		t.Error("resized a group the engine never accepted")
	}
}

// A refused creation whose spec changes is a new creation, judged again.
func TestRefusedCreationJudgedAgain(t *testing.T) {
	e := live()
	e.Create("g", m.Times(2), at(0))
	verdict(t, e, "g", at(time.Second), false)
	e.Create("g", m, at(5*time.Second))
	if _, ok := e.Decide("g", at(5*time.Second)); ok {
		t.Error("the old verdict answered for the new creation")
	}
	verdict(t, e, "g", at(6*time.Second), true)
	// A new ask before the verdict only replaces what it asks for (the quota is full).
	e.Create("h", xs2, at(10*time.Second))
	e.Create("h", Usage{}, at(10500*time.Millisecond))
	verdict(t, e, "h", at(11*time.Second), true)
	held(t, e, at(11*time.Second), controlPlane.Add(m))
}

func TestResetDropsLeaksAndClosesTheBatch(t *testing.T) {
	e := live()
	e.Create("big", m.Times(2), at(0))
	verdict(t, e, "big", at(time.Second), false)
	e.Delete("big", at(2*time.Second))
	e.Create("a", m, at(3*time.Second))
	e.Reset(at(3100 * time.Millisecond))
	held(t, e, at(3100*time.Millisecond), controlPlane)
	// b would have joined a's batch; after the reset it is judged alone, after a.
	e.Create("b", m, at(3200*time.Millisecond))
	verdict(t, e, "a", at(4*time.Second), true)
	verdict(t, e, "b", at(4200*time.Millisecond), false)
}

func TestNextEventFollowsBatchesAndVerdicts(t *testing.T) {
	e := live()
	if _, ok := e.NextEvent(at(0)); ok {
		t.Error("an idle engine has an event")
	}
	e.Create("a", xs2, at(0))
	e.Create("b", xs2, at(800*time.Millisecond))
	for _, c := range []struct{ now, want time.Duration }{
		{0, time.Second},                       // the batch's judgement
		{time.Second, 1800 * time.Millisecond}, // b's verdict
		{1800 * time.Millisecond, -1},          // nothing left
		{900 * time.Millisecond, -1},           // the clock does not go back
	} {
		next, ok := e.NextEvent(at(c.now))
		if c.want < 0 {
			if ok {
				t.Errorf("at %s: next %s, want none", c.now, next.Sub(t0))
			}
			continue
		}
		if !ok || !next.Equal(at(c.want)) {
			t.Errorf("at %s: next %v %s, want %s", c.now, ok, next.Sub(t0), c.want)
		}
	}
}

func TestHoldReplaces(t *testing.T) {
	e := live()
	e.Hold("adopted", m, at(0))
	held(t, e, at(0), controlPlane.Add(m))
	// Adopted groups are not building: deleting one gives its holding back.
	e.Delete("adopted", at(1*time.Second))
	held(t, e, at(1*time.Second), controlPlane)
	e.Hold("control-plane", Usage{}, at(2*time.Second))
	held(t, e, at(2*time.Second), Usage{})
}

func TestLegacyMessageCPU(t *testing.T) {
	if got := LegacyMessage(Usage{CPU: 40, GB: 1000}, Usage{CPU: 44, GB: 44}); got != "Quota exceeded: CPU max: limit = 40 | actual = 44" {
		t.Errorf("message %q", got)
	}
}
