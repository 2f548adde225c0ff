package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Event is one change the apiserver reported, as a Recording hands it on.
type Event struct {
	Type   watch.EventType
	Object client.Object
	// At is when the recording received it.
	At time.Time
	// Listed says the object was in the recording's first list: it existed before the
	// recording started, so its first sighting is no creation.
	Listed bool
	// Resumed says the change was found by a list after a watch ended (RecordResuming): it
	// happened at some time before At, which the recording cannot tell.
	Resumed bool
}

// Recording is a list of one kind of object, then a watch from the list's resource version:
// every change after the list is handed on in the apiserver's order, and nothing that existed
// before is taken for a creation. It is the one way the suites, the lifecycle tests and the
// bench follow objects.
//
// A watch the apiserver ends early (its timeout, a consumer it finds too slow) or an error
// event would hide whatever happened next. A Recording from Record then stops, and Stop and
// Err report it: the test fails. One from RecordResuming lists again, hands on what changed
// meanwhile as Resumed events (deletions included), watches again, and counts the gaps: for
// measurements, which would rather keep an approximate time than lose the rest of a run.
type Recording struct {
	what   string
	c      client.WithWatch
	list   client.ObjectList
	opts   []client.ListOption
	on     func(Event)
	resume bool
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// known is the last state of every object, by UID, kept when resuming: a list after a gap
	// is compared with it to find what went meanwhile.
	known map[types.UID]client.Object

	mu       sync.Mutex
	w        watch.Interface
	stopping bool
	early    error
	gaps     int
}

// Record lists the objects of list's kind matching opts and starts watching them from the
// list's resource version. on receives every event after the list, from one goroutine, in
// order; it must not block for long. The listed objects are returned. Stop the recording
// (t.Cleanup) and fail the test on its error.
func Record(ctx context.Context, c client.WithWatch, list client.ObjectList, on func(Event), opts ...client.ListOption) ([]client.Object, *Recording, error) {
	return start(ctx, c, list, on, false, opts)
}

// RecordResuming is Record for measurements: a watch that ends early is followed by a list
// and a new watch instead of an error (Gaps counts them).
func RecordResuming(ctx context.Context, c client.WithWatch, list client.ObjectList, on func(Event), opts ...client.ListOption) ([]client.Object, *Recording, error) {
	return start(ctx, c, list, on, true, opts)
}

func start(ctx context.Context, c client.WithWatch, list client.ObjectList, on func(Event), resume bool, opts []client.ListOption) ([]client.Object, *Recording, error) {
	rctx, cancel := context.WithCancel(ctx)
	r := &Recording{
		what: fmt.Sprintf("%T", list), c: c, list: list, opts: opts, on: on, resume: resume,
		ctx: rctx, cancel: cancel, done: make(chan struct{}), known: map[types.UID]client.Object{},
	}
	existing, rv, err := r.listAll()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	listed := map[types.UID]bool{}
	for _, o := range existing {
		listed[o.GetUID()] = true
		if resume {
			r.known[o.GetUID()] = o
		}
	}
	w, err := r.watchFrom(rv)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	r.w = w
	go r.run(w, listed)
	return existing, r, nil
}

// listAll lists the objects and returns them with the list's resource version.
func (r *Recording) listAll() ([]client.Object, string, error) {
	l := r.list.DeepCopyObject().(client.ObjectList)
	if err := r.c.List(r.ctx, l, r.opts...); err != nil {
		return nil, "", fmt.Errorf("listing %s to watch them: %w", r.what, err)
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", r.what, err)
	}
	out := make([]client.Object, 0, len(items))
	for _, it := range items {
		if o, ok := it.(client.Object); ok {
			out = append(out, o)
		}
	}
	return out, l.GetResourceVersion(), nil
}

// watchFrom watches with the caller's options from resource version rv.
func (r *Recording) watchFrom(rv string) (watch.Interface, error) {
	lo := (&client.ListOptions{}).ApplyOptions(r.opts)
	raw := &metav1.ListOptions{}
	if lo.Raw != nil {
		raw = lo.Raw.DeepCopy()
	}
	raw.ResourceVersion = rv
	lo.Raw = raw
	w, err := r.c.Watch(r.ctx, r.list.DeepCopyObject().(client.ObjectList), lo)
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", r.what, err)
	}
	return w, nil
}

func (r *Recording) run(w watch.Interface, listed map[types.UID]bool) {
	defer close(r.done)
	for {
		ended := r.consume(w, listed)
		if r.isStopping() {
			return
		}
		if !r.resume {
			r.endEarly(ended)
			return
		}
		next, ok := r.resumeAfterGap()
		if !ok {
			return
		}
		w = next
	}
}

// consume hands on the watch's events until it ends, and says why it ended.
func (r *Recording) consume(w watch.Interface, listed map[types.UID]bool) error {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			w.Stop()
			return fmt.Errorf("the watch on %s failed: %w", r.what, apierrors.FromObject(ev.Object))
		case watch.Bookmark:
			continue
		}
		o, ok := ev.Object.(client.Object)
		if !ok {
			continue
		}
		if r.resume {
			if ev.Type == watch.Deleted {
				delete(r.known, o.GetUID())
			} else {
				r.known[o.GetUID()] = o
			}
		}
		r.on(Event{Type: ev.Type, Object: o, At: time.Now(), Listed: listed[o.GetUID()]})
	}
	return fmt.Errorf("the watch on %s ended before the recording was stopped: what came next went unseen", r.what)
}

// resumeAfterGap lists again, hands on what changed since the last event (deletions
// included), and watches again; it retries until the recording stops.
func (r *Recording) resumeAfterGap() (watch.Interface, bool) {
	r.mu.Lock()
	r.gaps++
	r.mu.Unlock()
	retry := time.NewTicker(500 * time.Millisecond)
	defer retry.Stop()
	for {
		if objs, rv, err := r.listAll(); err == nil {
			if w, err := r.watchFrom(rv); err == nil {
				now := time.Now()
				seen := map[types.UID]bool{}
				for _, o := range objs {
					seen[o.GetUID()] = true
					r.known[o.GetUID()] = o
					r.on(Event{Type: watch.Modified, Object: o, At: now, Resumed: true})
				}
				for uid, o := range r.known {
					if !seen[uid] {
						delete(r.known, uid)
						r.on(Event{Type: watch.Deleted, Object: o, At: now, Resumed: true})
					}
				}
				r.mu.Lock()
				r.w = w
				r.mu.Unlock()
				return w, true
			}
		}
		select {
		case <-r.ctx.Done():
			return nil, false
		case <-retry.C:
		}
	}
}

func (r *Recording) isStopping() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopping
}

func (r *Recording) endEarly(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopping && r.early == nil {
		r.early = err
	}
}

// Err is the reason the watch ended before Stop, nil while it runs (or after a clean Stop).
// A resuming recording has none: see Gaps.
func (r *Recording) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.early
}

// Gaps is how many times a resuming recording's watch ended early and was resumed.
func (r *Recording) Gaps() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gaps
}

// Stop ends the recording once the callback has returned, and returns Err.
func (r *Recording) Stop() error {
	r.mu.Lock()
	r.stopping = true
	w := r.w
	r.mu.Unlock()
	r.cancel()
	if w != nil {
		w.Stop()
	}
	<-r.done
	return r.Err()
}
