package cloudprovider

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// unavailable remembers flavors the organisation quota refused, so the scheduler stops
// choosing them (and Create stops cycling create → reject → delete) until capacity frees or
// the memory expires.
type unavailable struct {
	clock clock.Clock
	ttl   time.Duration

	mu    sync.Mutex
	until map[string]time.Time
}

func newUnavailable(clk clock.Clock, ttl time.Duration) *unavailable {
	return &unavailable{clock: clk, ttl: ttl, until: map[string]time.Time{}}
}

func (u *unavailable) mark(flavors ...string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	deadline := u.clock.Now().Add(u.ttl)
	for _, f := range flavors {
		u.until[f] = deadline
	}
}

// clear forgets every rejection: called when capacity frees (a managed group is deleted).
func (u *unavailable) clear() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.until)
}

// snapshot returns the flavors currently marked, or nil.
func (u *unavailable) snapshot() map[string]bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.until) == 0 {
		return nil
	}
	now := u.clock.Now()
	out := map[string]bool{}
	for f, t := range u.until {
		if now.Before(t) {
			out[f] = true
		} else {
			delete(u.until, f)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
