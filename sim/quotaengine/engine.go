// Package quotaengine is CKE's organisation quota engine as the platform shows it, kept
// apart from Kubernetes so that it can be driven by the simulated operator and, step by
// step, by a discrete-event simulation alike.
//
// The engine is pure: no goroutine, no wall clock, no Kubernetes type. Every method takes
// the time it happens at (now); callers pass a nondecreasing clock (an earlier now is taken
// as "nothing has happened since"). Work that falls due between two calls (a batch judged,
// a leak expiring) is done, in time order, at the start of the next call, at the time it
// fell due: the result depends only on the sequence of calls and their times.
//
// What it models, per group name:
//
//   - Create enlists a creation. Creations made within BatchWindow of the first one of a
//     batch are judged together, BatchWindow (or DecisionDelay, if longer) after it opened:
//     the members' sum is added to everything held (accepted groups, live leaks, Other); if
//     the total overflows Limit on CPU or GB, every member is refused. A member's verdict is
//     given (Decide) no earlier than DecisionDelay after its own creation.
//   - An accepted creation holds what it asked for and is building until Built.
//   - Resize judges a new size of an accepted group at once, against everything else held;
//     a refusal leaves the group's holding as it was. Giving nodes back always succeeds.
//   - Delete is the group going. An accepted group that was built gives its holding back.
//     These leak instead, for LeakTTL from the deletion: what a refused creation asked for,
//     the holding of a group still building, and what a creation asked for if it is
//     deleted before its verdict.
//   - Drop is the platform removing a group on its own: its holding comes back, nothing
//     leaks.
//   - Hold records use that is not judged: the cluster's control plane, or groups accepted
//     before the engine started.
//   - Options.Other is what the organisation's other clusters use: counted in every
//     judgement, invisible to a provider. Options (Limit included) may change at any time;
//     holdings are never taken back when Limit is lowered, only later judgements see it.
//
// With LegacyMessage, a refusal carries the 2026-06 message naming the limit and the total
// ("Quota exceeded: RAM max: limit = 40.0 GB | actual = 48.0 GB"); otherwise it is empty, as
// on today's platform.
package quotaengine

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Usage is an amount of the organisation quota: vCPUs and nominal GB of RAM.
type Usage struct {
	CPU int64
	GB  int64
}

// Add returns u + o.
func (u Usage) Add(o Usage) Usage { return Usage{u.CPU + o.CPU, u.GB + o.GB} }

// Sub returns u − o.
func (u Usage) Sub(o Usage) Usage { return Usage{u.CPU - o.CPU, u.GB - o.GB} }

// Times returns n × u.
func (u Usage) Times(n int64) Usage { return Usage{u.CPU * n, u.GB * n} }

// Fits reports whether u is within limit on both resources.
func (u Usage) Fits(limit Usage) bool { return u.CPU <= limit.CPU && u.GB <= limit.GB }

// Options shape the engine.
type Options struct {
	// Limit is the organisation quota.
	Limit Usage
	// Other is what the organisation's other clusters hold.
	Other Usage
	// BatchWindow: creations within this long of a batch's first are judged with it. Zero
	// judges each creation alone.
	BatchWindow time.Duration
	// DecisionDelay: a creation → its verdict.
	DecisionDelay time.Duration
	// LeakTTL is how long a leaked reservation counts. Zero: nothing leaks.
	LeakTTL time.Duration
	// LegacyMessage words refusals as the platform did until 2026-06.
	LegacyMessage bool
}

// Decision is the verdict on a creation.
type Decision struct {
	Name     string
	Accepted bool
	// Message is the refusal's message: empty unless Options.LegacyMessage.
	Message string
	// At is when the verdict is given: max(the batch's judgement, creation + DecisionDelay).
	At time.Time
}

// Engine is one organisation's quota engine. Its methods are safe for concurrent use.
type Engine struct {
	mu   sync.Mutex
	opts Options
	// last is the latest time the engine has caught up to.
	last time.Time
	seq  uint64

	held     map[string]Usage
	building map[string]bool
	refused  map[string]Usage // what a refused creation asked for, until it is deleted
	pending  map[string]*member
	verdicts map[string]Decision // the latest verdict per name, until the name is deleted
	batches  []*batch            // not judged yet, in opening order
	open     *batch              // the batch newcomers join while its window lasts
	leaks    []leak
}

type member struct {
	name  string
	want  Usage
	at    time.Time
	batch *batch
}

type batch struct {
	seq      uint64
	opened   time.Time
	closesAt time.Time
	judgeAt  time.Time
	members  []*member
}

type leak struct {
	usage       Usage
	from, until time.Time
}

// New returns an engine that holds nothing.
func New(opts Options) *Engine {
	return &Engine{
		opts:     opts,
		held:     map[string]Usage{},
		building: map[string]bool{},
		refused:  map[string]Usage{},
		pending:  map[string]*member{},
		verdicts: map[string]Decision{},
	}
}

// Options returns the options in force.
func (e *Engine) Options() Options {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.opts
}

// Configure changes the options at now. Batches due before now are judged under the old
// ones; batches already open keep their judgement time.
func (e *Engine) Configure(now time.Time, mutate func(*Options)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advance(now)
	mutate(&e.opts)
}

// Create enlists name's creation, asking for want, made at now. For a creation not judged
// yet it only replaces what it asks for; for a refused one it is a new creation (the spec
// changed); for an accepted group it does nothing (see Resize).
func (e *Engine) Create(name string, want Usage, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now = e.advance(now)
	if _, ok := e.held[name]; ok {
		return
	}
	if m := e.pending[name]; m != nil {
		m.want = want
		return
	}
	delete(e.refused, name)
	delete(e.verdicts, name)
	b := e.open
	if b == nil || now.Before(b.opened) || !now.Before(b.closesAt) {
		e.seq++
		b = &batch{
			seq:      e.seq,
			opened:   now,
			closesAt: now.Add(e.opts.BatchWindow),
			judgeAt:  now.Add(max(e.opts.BatchWindow, e.opts.DecisionDelay)),
		}
		e.batches = append(e.batches, b)
		e.open = b
	}
	m := &member{name: name, want: want, at: now, batch: b}
	b.members = append(b.members, m)
	e.pending[name] = m
}

// Decide returns the verdict on name's latest creation once it is given (decided true).
// Before that, decided is false and the Decision carries only Name and At, when it will be
// given (zero At: the engine knows no creation of that name).
func (e *Engine) Decide(name string, now time.Time) (d Decision, decided bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now = e.advance(now)
	if m := e.pending[name]; m != nil {
		return Decision{Name: name, At: later(m.batch.judgeAt, m.at.Add(e.opts.DecisionDelay))}, false
	}
	v, ok := e.verdicts[name]
	if !ok {
		return Decision{Name: name}, false
	}
	if now.Before(v.At) {
		return Decision{Name: name, At: v.At}, false
	}
	return v, true
}

// Resize judges, at now, an accepted group's new size, want, against everything else held.
// Shrinking always succeeds. A refusal keeps the group's holding as it was. A name that is
// not an accepted group is refused with no message and nothing changes.
func (e *Engine) Resize(name string, want Usage, now time.Time) (accepted bool, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now = e.advance(now)
	cur, ok := e.held[name]
	if !ok {
		return false, ""
	}
	if want.Fits(cur) {
		e.held[name] = want
		return true, ""
	}
	total := e.heldAt(now).Sub(cur).Add(want)
	if !total.Fits(e.opts.Limit) {
		return false, e.message(total)
	}
	e.held[name] = want
	return true, ""
}

// Built records that name's first reconcile is over: deleting it now gives its holding back.
func (e *Engine) Built(name string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advance(now)
	delete(e.building, name)
}

// Delete records that name is gone at now (for a running group: its VMs are): it gives
// back or leaks what the name held or asked for (see the package comment). Unknown names
// are ignored.
func (e *Engine) Delete(name string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now = e.advance(now)
	var leaked Usage
	if m := e.pending[name]; m != nil {
		leaked = m.want
	} else if u, ok := e.held[name]; ok && e.building[name] {
		leaked = u
	} else if u, ok := e.refused[name]; ok {
		leaked = u
	}
	e.forget(name)
	if e.opts.LeakTTL > 0 && leaked != (Usage{}) {
		e.leaks = append(e.leaks, leak{usage: leaked, from: now, until: now.Add(e.opts.LeakTTL)})
	}
}

// Drop records that the platform removed name on its own at now: whatever it held comes
// back at once and nothing leaks.
func (e *Engine) Drop(name string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advance(now)
	e.forget(name)
}

// Hold records, from now, that name holds u without judgement (the control plane, a group
// accepted before the engine started). It replaces whatever name held or asked for.
func (e *Engine) Hold(name string, u Usage, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advance(now)
	e.forget(name)
	e.held[name] = u
}

// Held is everything the engine counts at now: holdings, live leaks and Other.
func (e *Engine) Held(now time.Time) Usage {
	e.mu.Lock()
	defer e.mu.Unlock()
	now = e.advance(now)
	return e.heldAt(now)
}

// Leaked is the part of Held that leaked reservations make up at now.
func (e *Engine) Leaked(now time.Time) Usage {
	e.mu.Lock()
	defer e.mu.Unlock()
	now = e.advance(now)
	return e.leakedAt(now)
}

// NextEvent is the next time after now at which the engine's answers change on their own (a
// batch judged, a verdict given, a leak expiring); ok is false if none will.
func (e *Engine) NextEvent(now time.Time) (next time.Time, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now = e.advance(now)
	consider := func(t time.Time) {
		if t.After(now) && (!ok || t.Before(next)) {
			next, ok = t, true
		}
	}
	for _, b := range e.batches {
		consider(b.judgeAt)
	}
	for _, v := range e.verdicts {
		consider(v.At)
	}
	for _, l := range e.leaks {
		consider(l.until)
	}
	return next, ok
}

// Reset drops every leaked reservation and closes the open batch to newcomers; holdings,
// pending creations and verdicts stay.
func (e *Engine) Reset(now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advance(now)
	e.leaks, e.open = nil, nil
}

// advance judges every batch due by now, oldest judgement first, each at its own time, then
// drops the leaks that have expired. It returns now, or the latest time already reached if
// now is earlier: the engine's clock never goes back.
func (e *Engine) advance(now time.Time) time.Time {
	if now.Before(e.last) {
		now = e.last
	}
	e.last = now
	slices.SortStableFunc(e.batches, func(a, b *batch) int {
		if c := a.judgeAt.Compare(b.judgeAt); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for len(e.batches) > 0 && !now.Before(e.batches[0].judgeAt) {
		b := e.batches[0]
		e.batches = e.batches[1:]
		if e.open == b {
			e.open = nil
		}
		e.judge(b)
	}
	e.leaks = slices.DeleteFunc(e.leaks, func(l leak) bool { return !now.Before(l.until) })
	return now
}

// judge gives one batch its verdict, at its judgement time.
func (e *Engine) judge(b *batch) {
	if len(b.members) == 0 {
		return
	}
	total := e.heldAt(b.judgeAt)
	for _, m := range b.members {
		total = total.Add(m.want)
	}
	accepted := total.Fits(e.opts.Limit)
	message := ""
	if !accepted {
		message = e.message(total)
	}
	for _, m := range b.members {
		delete(e.pending, m.name)
		e.verdicts[m.name] = Decision{
			Name: m.name, Accepted: accepted, Message: message,
			At: later(b.judgeAt, m.at.Add(e.opts.DecisionDelay)),
		}
		if accepted {
			e.held[m.name] = m.want
			e.building[m.name] = true
		} else {
			e.refused[m.name] = m.want
		}
	}
}

func (e *Engine) heldAt(t time.Time) Usage {
	u := e.opts.Other.Add(e.leakedAt(t))
	for _, h := range e.held {
		u = u.Add(h)
	}
	return u
}

func (e *Engine) leakedAt(t time.Time) Usage {
	var u Usage
	for _, l := range e.leaks {
		if !t.Before(l.from) && t.Before(l.until) {
			u = u.Add(l.usage)
		}
	}
	return u
}

// forget removes every trace of name but the leaks it left.
func (e *Engine) forget(name string) {
	if m := e.pending[name]; m != nil {
		m.batch.members = slices.DeleteFunc(m.batch.members, func(o *member) bool { return o == m })
	}
	delete(e.pending, name)
	delete(e.held, name)
	delete(e.building, name)
	delete(e.refused, name)
	delete(e.verdicts, name)
}

func (e *Engine) message(total Usage) string {
	if !e.opts.LegacyMessage {
		return ""
	}
	return LegacyMessage(e.opts.Limit, total)
}

// LegacyMessage words a refusal as CKE's quota engine did until 2026-06. RAM is checked
// first: with CKE's flavors (more GB than vCPUs) it is the limit groups hit in the field.
// The RAM figures carry one decimal, the CPU figures none, as in the field reports.
func LegacyMessage(limit, actual Usage) string {
	if actual.GB > limit.GB {
		return fmt.Sprintf("Quota exceeded: RAM max: limit = %.1f GB | actual = %.1f GB", float64(limit.GB), float64(actual.GB))
	}
	return fmt.Sprintf("Quota exceeded: CPU max: limit = %d | actual = %d", limit.CPU, actual.CPU)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
