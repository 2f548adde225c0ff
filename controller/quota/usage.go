package quota

import (
	"fmt"
	"time"
)

// Usage is an amount of quota: vCPUs and nominal GB of memory.
type Usage struct {
	CPU int64
	GB  int64
}

// Add returns u + o.
func (u Usage) Add(o Usage) Usage { return Usage{u.CPU + o.CPU, u.GB + o.GB} }

// Times returns u for each of n nodes.
func (u Usage) Times(n int64) Usage { return Usage{u.CPU * n, u.GB * n} }

// Sub returns u − o.
func (u Usage) Sub(o Usage) Usage { return Usage{u.CPU - o.CPU, u.GB - o.GB} }

// FitsIn says whether u fits within headroom h, in both resources.
func (u Usage) FitsIn(h Usage) bool { return u.CPU <= h.CPU && u.GB <= h.GB }

// Max returns the larger of u and o in each resource.
func (u Usage) Max(o Usage) Usage { return Usage{max(u.CPU, o.CPU), max(u.GB, o.GB)} }

func (u Usage) String() string { return fmt.Sprintf("%d vCPU / %d GB", u.CPU, u.GB) }

// Limit is the quota; a zero field is unknown and does not constrain.
type Limit struct {
	CPU int64
	GB  int64
}

func (l Limit) String() string {
	part := func(v int64) string {
		if v == 0 {
			return "unknown"
		}
		return fmt.Sprint(v)
	}
	return part(l.CPU) + " vCPU / " + part(l.GB) + " GB"
}

// GroupState is what an observation says of one NodeGroup.
type GroupState uint8

const (
	// GroupUncharged: the group exists but charges nothing (the quota refused it).
	GroupUncharged GroupState = iota
	// GroupCharged: the group is charged, the platform's decision not seen.
	GroupCharged
	// GroupCreating: the platform accepted the group and is building it (its first
	// reconcile runs: deleting it now leaks its reservation upstream).
	GroupCreating
	// GroupBuilt: the platform accepted the group and built it.
	GroupBuilt
)

// accepted says whether the platform accepted a group in this state.
func (s GroupState) accepted() bool { return s == GroupCreating || s == GroupBuilt }

// Group is what an observation says of one NodeGroup.
type Group struct {
	State GroupState
	// Size is what the group charges, or would charge if it were not refused.
	Size Usage
	// Deleting says the group is being deleted.
	Deleting bool
}

// Observation is a fresh count of what the organisation quota charges in the cluster.
type Observation struct {
	// Usage is every charged NodeGroup's nodes plus the control plane.
	Usage Usage
	// Proven is the part of Usage the platform accepted: accepted groups plus the control
	// plane. Every accepted group alive now was alive when the last of them was accepted, so
	// the limit is at least Proven.
	Proven Usage
	// Groups are the NodeGroups the count saw, by name.
	Groups map[string]Group
}

type reservation struct {
	usage Usage
	at    time.Time
}

// Observe replaces the usage with a fresh count, naming the NodeGroups it includes (true:
// charged). Prefer Record, which also carries the proven use.
func (t *Tracker) Observe(u Usage, groups map[string]bool) {
	o := Observation{Usage: u, Groups: make(map[string]Group, len(groups))}
	for name, charged := range groups {
		o.Groups[name] = Group{State: GroupUncharged}
		if charged {
			o.Groups[name] = Group{State: GroupCharged}
		}
	}
	t.Record(o)
}

// Record replaces the usage with a fresh count of the cluster. The reservations of the groups
// it saw end, since they are now counted; the proven use raises the limit's lower bound.
func (t *Tracker) Record(o Observation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	// A group deleted before the platform's decision or while it built the group leaks its
	// reservation once it is gone (a refused group's leak is suspected from its refusal on).
	for name, gr := range o.Groups {
		if gr.Deleting && (gr.State == GroupCreating || gr.State == GroupCharged) {
			t.deletedEarly[name] = gr.Size
		}
	}
	for name, size := range t.deletedEarly {
		if _, seen := o.Groups[name]; !seen {
			t.leaks = append(t.leaks, reservation{usage: size, at: now})
			delete(t.deletedEarly, name)
		}
	}
	// Only a verdict proves anything of the limit in force: groups that keep running after the
	// quota was lowered prove nothing new (the engine never takes holdings back). The proven
	// use is taken as a bound when the count shows a group newly accepted.
	newlyAccepted := t.proven == (Usage{})
	for name, gr := range o.Groups {
		if gr.State.accepted() && !t.groups[name].State.accepted() {
			newlyAccepted = true
		}
	}
	t.usage, t.proven, t.groups = o.Usage, o.Proven, o.Groups
	if t.groups == nil {
		t.groups = map[string]Group{}
	}
	for name := range t.reservations {
		if _, seen := t.groups[name]; seen {
			delete(t.reservations, name)
		}
	}
	for name := range t.vouched {
		if t.groups[name].State.accepted() {
			delete(t.vouched, name)
		}
	}
	// A launch whose acceptance the count shows is judged, even if Create gave up waiting for
	// the verdict: a probe must not keep every other launch waiting until reservationTTL.
	for name := range t.launches {
		if t.groups[name].State.accepted() {
			delete(t.launches, name)
		}
	}
	// A cache that has not seen a refusal yet still charges the group: not again.
	for name, r := range t.refusedGroups {
		gr, seen := t.groups[name]
		switch {
		case now.Sub(r.at) > reservationTTL || (seen && gr.State == GroupUncharged):
			delete(t.refusedGroups, name)
		case seen:
			t.usage = t.usage.Sub(r.usage)
			gr.State = GroupUncharged
			t.groups[name] = gr
		}
	}
	if newlyAccepted {
		t.raiseFloorLocked()
	}
	t.notePeakLocked()
	t.changedLocked()
}

// usedLocked is what the quota engine may be charging, as far as the provider can tell: the
// observed use, the launches admitted and not counted yet, and the reservations it suspects
// leaked upstream. It forgets reservations and launches that waited too long.
func (t *Tracker) usedLocked() Usage {
	used := t.usage.Add(t.leakedLocked())
	now := t.clock.Now()
	for name, r := range t.reservations {
		if now.Sub(r.at) > reservationTTL {
			delete(t.reservations, name)
			continue
		}
		used = used.Add(r.usage)
	}
	for name, l := range t.launches {
		if now.Sub(l.at) > reservationTTL {
			delete(t.launches, name)
		}
	}
	return used
}

// leakedLocked sums the reservations suspected leaked upstream and still within the leak's
// lifetime, and drops the older ones.
func (t *Tracker) leakedLocked() Usage {
	var sum Usage
	now := t.clock.Now()
	kept := t.leaks[:0]
	for _, l := range t.leaks {
		if now.Sub(l.at) < leakLifetime() {
			kept = append(kept, l)
			sum = sum.Add(l.usage)
		}
	}
	clear(t.leaks[len(kept):])
	t.leaks = kept
	return sum
}

// notePeakLocked raises every waiting launch's peak to what is counted now.
func (t *Tracker) notePeakLocked() {
	used := t.usedLocked()
	for _, l := range t.launches {
		l.peak = l.peak.Max(used)
	}
}
