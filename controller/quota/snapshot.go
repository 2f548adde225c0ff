package quota

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Snapshot is what the tracker knows that a restart or a new leader must not forget: the
// refused uses, the refusals that keep CKE's default from being assumed, the suspected leaks
// and the proofs, each with the time it ends. It is also what a user reads to see why a pod
// waits on the quota (Summary). Times are absolute, so a snapshot restored later keeps each
// memory's end, never extends it.
type Snapshot struct {
	// SavedAt is when the snapshot was taken.
	SavedAt time.Time `json:"savedAt"`
	// InUse is the use counted in the cluster; Configured the limit configured (0: inferred).
	InUse      Usage `json:"inUse"`
	Configured Limit `json:"configured"`
	// Limit is the limit known in force (0: unknown); Sure what launches may fly together on.
	Limit Limit `json:"limit"`
	Sure  Usage `json:"sure"`
	// Proofs are the proven lower bounds of the limit, by resource.
	ProvenCPU Memory `json:"provenCPU"`
	ProvenGB  Memory `json:"provenGB"`
	// Refused are the refused uses still ruled out; Doubts the older ones within CKE's
	// default, which keep it from being assumed.
	Refused []Remembered `json:"refused,omitempty"`
	Doubts  []Remembered `json:"doubts,omitempty"`
	// Leaks are the reservations suspected leaked upstream.
	Leaks []Remembered `json:"leaks,omitempty"`
	// NextProbe is the earliest a probe may fly: when the last suspected leak expires (zero
	// when none is suspected).
	NextProbe time.Time `json:"nextProbe,omitzero"`
}

// Remembered is a use the tracker remembers until a time.
type Remembered struct {
	Use   Usage     `json:"use"`
	Until time.Time `json:"until"`
}

// Memory is a value the tracker trusts until a time.
type Memory struct {
	Value int64     `json:"value,omitempty"`
	Until time.Time `json:"until,omitzero"`
}

// Snapshot returns what the tracker knows now.
func (t *Tracker) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	s := Snapshot{SavedAt: now, InUse: t.usage, Configured: t.configured, Limit: t.limitLocked(), Sure: t.sureLocked()}
	memory := func(st stamp) Memory {
		if t.live(st, learnedLimitTTL) == 0 {
			return Memory{}
		}
		return Memory{Value: st.value, Until: st.at.Add(learnedLimitTTL)}
	}
	s.ProvenCPU, s.ProvenGB = memory(t.floorCPU), memory(t.floorGB)
	for _, r := range t.liveRefusalsLocked() {
		s.Refused = append(s.Refused, Remembered{Use: r.use, Until: r.until})
	}
	for _, r := range t.history {
		if r.use.FitsIn(Usage(DefaultLimit)) {
			s.Doubts = append(s.Doubts, Remembered{Use: r.use, Until: r.until.Add(defaultDoubtTTL)})
		}
	}
	t.leakedLocked()
	for _, l := range t.leaks {
		until := l.at.Add(leakLifetime())
		s.Leaks = append(s.Leaks, Remembered{Use: l.usage, Until: until})
		if until.After(s.NextProbe) {
			s.NextProbe = until
		}
	}
	return s
}

// Restore adds what a snapshot remembers to what the tracker knows: the memories that have
// not ended yet, each until its own end. Refused uses the configured limit says fit are not
// restored (the configuration wins). Restoring twice is harmless.
func (t *Tracker) Restore(s Snapshot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	for _, r := range s.Refused {
		if now.Before(r.Until) && !slices.ContainsFunc(t.refusals, func(p refusedPoint) bool { return p == r.asPoint() }) {
			t.refusals = append(t.refusals, r.asPoint())
		}
	}
	for _, r := range s.Doubts {
		// A doubt is kept as the expired refusal it came from (history).
		p := refusedPoint{use: r.Use, until: r.Until.Add(-defaultDoubtTTL)}
		if now.Before(r.Until) && !slices.Contains(t.history, p) {
			t.history = append(t.history, p)
		}
	}
	for _, l := range s.Leaks {
		at := l.Until.Add(-leakLifetime())
		if now.Before(l.Until) && !slices.ContainsFunc(t.leaks, func(r reservation) bool { return r.usage == l.Use && r.at.Equal(at) }) {
			t.leaks = append(t.leaks, reservation{usage: l.Use, at: at})
		}
	}
	restore := func(dst *stamp, m Memory) {
		if m.Value > 0 && now.Before(m.Until) && m.Value >= t.live(*dst, learnedLimitTTL) {
			*dst = stamp{value: m.Value, at: m.Until.Add(-learnedLimitTTL)}
		}
	}
	restore(&t.floorCPU, s.ProvenCPU)
	restore(&t.floorGB, s.ProvenGB)
	t.dropConfiguredLocked()
	t.awaitingRestore = false
	t.changedLocked()
}

// restoreWait bounds how long launches wait for a snapshot (AwaitRestore) that does not come,
// from the first launch that waits: only a leader launches, so a standby replica's wait only
// starts once it leads.
const restoreWait = 30 * time.Second

// AwaitRestore holds launches (Try answers Busy) until Restore or RestoreSkipped is called, or
// restoreWait after the first launch that waited: a new leader must not probe into a leak
// its predecessor knew of.
func (t *Tracker) AwaitRestore() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.awaitingRestore, t.restoreBy = true, time.Time{}
}

// RestoreSkipped releases launches held by AwaitRestore when there is nothing to restore.
func (t *Tracker) RestoreSkipped() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.awaitingRestore = false
	t.changedLocked()
}

func (t *Tracker) restoringLocked() bool {
	if !t.awaitingRestore {
		return false
	}
	now := t.clock.Now()
	if t.restoreBy.IsZero() {
		t.restoreBy = now.Add(restoreWait)
	}
	if !now.Before(t.restoreBy) {
		t.awaitingRestore = false
	}
	return t.awaitingRestore
}

func (r Remembered) asPoint() refusedPoint { return refusedPoint{use: r.Use, until: r.Until} }

// Summary writes a snapshot for people, one fact a line: what a user reads to see why a pod
// waits on the quota and what would end the wait.
func (s Snapshot) Summary() string {
	var b strings.Builder
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	fmt.Fprintf(&b, "as of %s\n", at(s.SavedAt))
	fmt.Fprintf(&b, "in use: %s\n", s.InUse)
	if s.Configured != (Limit{}) {
		fmt.Fprintf(&b, "limit: %s, configured (settings.quota)\n", s.Configured)
	} else {
		fmt.Fprintf(&b, "limit: %s known (a zero is inferred from verdicts; configure settings.quota if you know it)\n", s.Limit)
	}
	fmt.Fprintf(&b, "launches fly together up to: %s\n", s.Sure)
	if s.ProvenCPU.Value > 0 || s.ProvenGB.Value > 0 {
		fmt.Fprintf(&b, "proven to fit: %d vCPU (until %s) / %d GB (until %s)\n", s.ProvenCPU.Value, at(s.ProvenCPU.Until), s.ProvenGB.Value, at(s.ProvenGB.Until))
	}
	for _, r := range s.Refused {
		fmt.Fprintf(&b, "refused use: %s and beyond, not launched until %s\n", r.Use, at(r.Until))
	}
	for _, r := range s.Doubts {
		fmt.Fprintf(&b, "refused within CKE's default: %s; launches beyond the proven use go one at a time until %s\n", r.Use, at(r.Until))
	}
	for _, l := range s.Leaks {
		fmt.Fprintf(&b, "suspected leak upstream: %s, counted as used until %s\n", l.Use, at(l.Until))
	}
	if !s.NextProbe.IsZero() {
		fmt.Fprintf(&b, "next probe (a launch beyond what is known to fit) no sooner than %s; to end the wait, raise the organisation's quota and set settings.quota\n", at(s.NextProbe))
	}
	return b.String()
}
