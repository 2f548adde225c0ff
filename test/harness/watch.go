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
	// recording started, so its Added-like first sighting is no creation.
	Listed bool
}

// Recording is a list of one kind of object, then a watch from the list's resource version:
// every change after the list is handed on in the apiserver's order, and nothing that
// existed before is taken for a creation. It is the one way the suites, the lifecycle tests
// and the bench follow objects. Its watch must last until Stop: a watch the apiserver ends
// early, or an error event, would hide whatever happened next, so Stop reports it.
type Recording struct {
	what   string
	cancel context.CancelFunc
	w      watch.Interface
	done   chan struct{}

	mu       sync.Mutex
	stopping bool
	early    error
}

// Record lists the objects of list's kind matching opts and starts watching them from the
// list's resource version. on receives every event after the list, from one goroutine, in
// order; it must not block for long. The listed objects are returned. Stop the recording
// (t.Cleanup) and fail the test on its error.
func Record(ctx context.Context, c client.WithWatch, list client.ObjectList, on func(Event), opts ...client.ListOption) ([]client.Object, *Recording, error) {
	what := fmt.Sprintf("%T", list)
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, nil, fmt.Errorf("listing %s to watch them: %w", what, err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", what, err)
	}
	existing := make([]client.Object, 0, len(items))
	listed := map[types.UID]bool{}
	for _, it := range items {
		if o, ok := it.(client.Object); ok {
			existing = append(existing, o)
			listed[o.GetUID()] = true
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	// The watch takes the caller's options and starts at the list's resource version.
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	raw := &metav1.ListOptions{}
	if lo.Raw != nil {
		raw = lo.Raw.DeepCopy()
	}
	raw.ResourceVersion = list.GetResourceVersion()
	lo.Raw = raw
	w, err := c.Watch(wctx, list.DeepCopyObject().(client.ObjectList), lo)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("watching %s: %w", what, err)
	}
	r := &Recording{what: what, cancel: cancel, w: w, done: make(chan struct{})}
	go r.run(listed, on)
	return existing, r, nil
}

func (r *Recording) run(listed map[types.UID]bool, on func(Event)) {
	defer close(r.done)
	for ev := range r.w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			r.endEarly(fmt.Errorf("the watch on %s failed: %w", r.what, apierrors.FromObject(ev.Object)))
			return
		case watch.Bookmark:
			continue
		}
		if o, ok := ev.Object.(client.Object); ok {
			on(Event{Type: ev.Type, Object: o, At: time.Now(), Listed: listed[o.GetUID()]})
		}
	}
	r.endEarly(fmt.Errorf("the watch on %s ended before the recording was stopped: what came next went unseen", r.what))
}

func (r *Recording) endEarly(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopping && r.early == nil {
		r.early = err
	}
}

// Err is the reason the watch ended before Stop, nil while it runs (or after a clean Stop).
func (r *Recording) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.early
}

// Stop ends the recording once the callback has returned, and returns Err.
func (r *Recording) Stop() error {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	r.cancel()
	r.w.Stop()
	<-r.done
	return r.Err()
}
