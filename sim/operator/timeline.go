package operator

import (
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// operation is one upstream call: the group's creation or a resize.
//
// Its milestones are amounts of work from its start, not times: the work stops while an
// upstream-error window is open, so the same operation lands later when a window opens over
// it, and a window set, moved or lifted at run time moves every milestone still to come.
type operation struct {
	creation bool
	start    time.Time
	// from is the number of nodes before the operation; nodes from..granted-1 are new.
	from int32
	// fault is the operation's own FaultUpstreamError window (zero: none).
	fault window
	join  time.Duration // new nodes join (never: they do not)
	sync  time.Duration // the operation completes (never: it does not)
	fail  time.Duration // FaultLateRefusal or FaultDeadLaunch fail it (never: nothing fails)
	// failInPlace: the failure keeps phase Creating (FaultDeadLaunch).
	failInPlace bool
	done        bool
}

// never is a milestone an operation does not reach.
const never time.Duration = -1

// window is a stretch of time in which upstream calls fail.
type window struct {
	from  time.Time
	until time.Time
}

func (w window) contains(t time.Time) bool { return !t.Before(w.from) && t.Before(w.until) }

// windows are the upstream-error windows an operation sees, earliest first.
func (op *operation) windows(opts Options) []window {
	var ws []window
	if !op.fault.until.IsZero() {
		ws = append(ws, op.fault)
	}
	if opts.UpstreamErrorFor > 0 {
		ws = append(ws, window{from: opts.UpstreamErrorFrom, until: opts.UpstreamErrorFrom.Add(opts.UpstreamErrorFor)})
	}
	slices.SortFunc(ws, func(a, b window) int { return a.from.Compare(b.from) })
	return ws
}

// at is when the operation reaches work d, its work paused in ws; zero for never.
func (op *operation) at(d time.Duration, ws []window) time.Time {
	if d < 0 {
		return time.Time{}
	}
	t, left := op.start, d
	for _, w := range ws {
		if !w.until.After(t) {
			continue
		}
		if w.from.After(t) {
			gap := w.from.Sub(t)
			if left <= gap {
				break
			}
			left -= gap
		}
		t = w.until
	}
	return t.Add(left)
}

// failing reports whether an upstream error shows at now.
func failing(ws []window, now time.Time) bool {
	return slices.ContainsFunc(ws, func(w window) bool { return w.contains(now) })
}

// plan lays out an accepted operation's milestones.
func (o *Operator) plan(op *operation, st *groupState, faults []Fault, opts Options, now time.Time) {
	op.join, op.sync, op.fail = never, never, never
	if slices.Contains(faults, FaultUpstreamError) && opts.UpstreamErrorDuration > 0 {
		// The call fails from the decision on, then goes through.
		op.fault = window{from: now, until: now.Add(opts.UpstreamErrorDuration)}
	}
	if !op.creation && st.granted < op.from {
		// Scale-down: the extra VMs go after TeardownDelay, then the group is synced.
		op.sync = opts.TeardownDelay
		return
	}
	join := opts.JoinDelay
	if op.creation && slices.Contains(faults, FaultSlowBoot) && opts.SlowBootDelay > join {
		join = opts.SlowBootDelay
	}
	// Synced comes the drawn delay after the start, never before the node joined; a slow
	// boot moves it by as much as it moves the join.
	op.join = join
	op.sync = max(st.syncDelay+join-opts.JoinDelay, join)
	if !op.creation {
		return
	}
	switch {
	case slices.Contains(faults, FaultLateRefusal):
		op.fail, op.join, op.sync = op.join, never, never
	case slices.Contains(faults, FaultDeadLaunch):
		op.fail, op.join, op.sync, op.failInPlace = op.join, never, never, true
	case slices.Contains(faults, FaultNeverSyncNoNode):
		op.join, op.sync = never, never
	case slices.Contains(faults, FaultNeverSync):
		op.sync = never
	}
}

// drawSyncDelay draws a group's creation → Synced delay from Seed and its name only, so a run
// is reproducible whatever order groups are seen in.
func drawSyncDelay(opts Options, name string) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	r := rand.New(rand.NewPCG(opts.Seed, h.Sum64()))
	d := opts.SyncDelayMin
	if spread := opts.SyncDelayMax - opts.SyncDelayMin; spread > 0 {
		d += time.Duration(r.Int64N(int64(spread) + 1))
	}
	if opts.SlowSyncProbability > 0 && r.Float64() < opts.SlowSyncProbability && opts.SlowSyncDelay > d {
		d = opts.SlowSyncDelay
	}
	return d
}

// wakeup collects the earliest time a reconcile must run again.
type wakeup struct{ t time.Time }

func (w *wakeup) at(t time.Time) {
	if w.t.IsZero() || t.Before(w.t) {
		w.t = t
	}
}

func (w *wakeup) result(now time.Time) reconcile.Result {
	if w.t.IsZero() {
		return reconcile.Result{}
	}
	// A millisecond late, so the deadline has passed when the reconcile runs.
	return reconcile.Result{RequeueAfter: max(w.t.Sub(now), 0) + time.Millisecond}
}
