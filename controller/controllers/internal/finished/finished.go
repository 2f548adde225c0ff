// Package finished remembers the objects a controller is done with, by UID, so that their
// later events are dropped before the work queue: an object written on every pod event of its
// node would otherwise be reconciled, and read, on each. An object is forgotten when it is
// deleted, so a new one under the same name starts afresh.
package finished

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Set is the UIDs of finished objects; its zero value is empty and ready.
type Set struct {
	mu   sync.Mutex
	uids map[types.UID]bool
}

// Add records the object with this UID as finished.
func (s *Set) Add(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uids == nil {
		s.uids = map[types.UID]bool{}
	}
	s.uids[uid] = true
}

// Has says the object with this UID is finished.
func (s *Set) Has(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uids[uid]
}

func (s *Set) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.uids, uid)
}

// Predicate passes the creations, updates and generic events of the objects keep accepts and
// the set does not hold. A deletion forgets the object, and passes when passDeletes is set and
// keep accepts it.
func (s *Set) Predicate(keep func(client.Object) bool, passDeletes bool) predicate.Funcs {
	open := func(o client.Object) bool { return keep(o) && !s.Has(o.GetUID()) }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return open(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return open(e.ObjectNew) },
		GenericFunc: func(e event.GenericEvent) bool { return open(e.Object) },
		DeleteFunc: func(e event.DeleteEvent) bool {
			s.forget(e.Object.GetUID())
			return passDeletes && keep(e.Object)
		},
	}
}
