package operator

import (
	"hash/fnv"
	"math"
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
	join := st.joinDelay
	if op.creation && slices.Contains(faults, FaultSlowBoot) && opts.SlowBootDelay > join {
		join = opts.SlowBootDelay
	}
	op.join = join
	// Synced is the drawn delay after the start. The measured 38–58 s already spans joins
	// anywhere in the typical spread, so a join inside it does not move Synced; it only keeps
	// Synced the shortest measured join → Synced gap after the node (a Synced written with
	// no node would be a platform never seen, and converge would mistake the node for a
	// rejoin). A join past the spread (a slow boot) moves Synced by as much as it passes it.
	gap := max(opts.SyncDelayMin-opts.JoinDelay, 0)
	late := max(join-max(opts.JoinDelay, opts.JoinDelayMax), 0)
	op.sync = max(st.syncDelay+late, join+gap)
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

// groupRand is a group's generator for one kind of draw, seeded by Seed and its name only, so
// a run is reproducible whatever order groups are seen in. Each kind has its own stream: a
// draw added later does not move the draws of existing runs.
func groupRand(opts Options, stream, name string) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(stream))
	_, _ = h.Write([]byte(name))
	return rand.New(rand.NewPCG(opts.Seed, h.Sum64()))
}

// joinSkew is the power the uniform draw of a join is raised to. The platform's joins are
// "~28 s typical; 26–60 s" (cke-platform.md §6): a floor that is hardly beaten, most joins
// just above it, a few up to a minute. JoinDelay + spread × u^k has exactly that shape: its
// density is highest at the floor and falls to the top, and its median is
// JoinDelay + spread / 2^k. With live's 26–60 s, k = 4 puts the median at 28.1 s, a quarter
// of the joins past 36.8 s and one in ten past 48.3 s, so scheduling passes still meet late
// joins; a uniform draw would put the median at 43 s, far from the typical 28 s.
const joinSkew = 4

// drawJoinDelay draws a group's creation → Node joined delay (see joinSkew), or SlowBootDelay
// for the SlowJoinProbability outliers.
func drawJoinDelay(opts Options, name string) time.Duration {
	r := groupRand(opts, "join/", name)
	d := opts.JoinDelay
	if spread := opts.JoinDelayMax - opts.JoinDelay; spread > 0 {
		d += time.Duration(float64(spread) * math.Pow(r.Float64(), joinSkew))
	}
	if opts.SlowJoinProbability > 0 && r.Float64() < opts.SlowJoinProbability && opts.SlowBootDelay > d {
		d = opts.SlowBootDelay
	}
	return d
}

// JoinDelayOf is the join a group of that name draws under these options, before faults: what
// a test or a bench compares the platform's story with.
func (o Options) JoinDelayOf(group string) time.Duration { return drawJoinDelay(o, group) }

// TypicalJoinDelay is the median of the joins drawn without the slow outliers: the join to
// hold a latency against.
func (o Options) TypicalJoinDelay() time.Duration {
	if spread := o.JoinDelayMax - o.JoinDelay; spread > 0 {
		return o.JoinDelay + spread>>joinSkew
	}
	return o.JoinDelay
}

// LatestJoinDelay is the latest a node of a group without faults may join: the slow outlier
// when the options play it, else the top of the spread. What a wait for every node needs.
func (o Options) LatestJoinDelay() time.Duration {
	d := max(o.JoinDelay, o.JoinDelayMax)
	if o.SlowJoinProbability > 0 {
		d = max(d, o.SlowBootDelay)
	}
	return d
}

// drawSyncDelay draws a group's creation → Synced delay.
func drawSyncDelay(opts Options, name string) time.Duration {
	r := groupRand(opts, "", name)
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
