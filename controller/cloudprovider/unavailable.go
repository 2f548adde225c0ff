package cloudprovider

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// How long each kind of refusal keeps a flavor unavailable. Neither ends when capacity frees:
// deleting a node changes nothing about why the flavor was refused. (Quota refusals are the
// quota tracker's: quota.Tracker.Blocked.)
const (
	// flavorUnsupportedTTL: the apiserver refuses a flavor its CRD's enum does not list. That
	// changes only when Clever Cloud upgrades the cluster's CRD, so the memory is long, and
	// each refusal renews it.
	flavorUnsupportedTTL = time.Hour
	// refusedTTL is the first memory of a refusal the provider cannot classify; each further
	// refusal of the flavor doubles it, up to maxRefusedTTL. A flavor the platform keeps
	// refusing is then asked about once an hour, not on every node deletion or consolidation
	// pass.
	refusedTTL    = 3 * time.Minute
	maxRefusedTTL = time.Hour
)

// unavailable remembers flavors the apiserver or the operator refused for another reason than
// the quota, so the scheduler stops choosing them (and Create stops cycling create → refuse →
// delete) until the memory expires.
type unavailable struct {
	clock clock.Clock

	mu      sync.Mutex
	flavors map[string]*marks
}

// marks are one flavor's refusals, one deadline per kind.
type marks struct {
	unsupported, refused time.Time
	// backoff is the memory the last unclassified refusal got. A refusal while the flavor
	// is within maxRefusedTTL of that memory's end is a repeat, and doubles it.
	backoff time.Duration
}

func newUnavailable(clk clock.Clock) *unavailable {
	return &unavailable{clock: clk, flavors: map[string]*marks{}}
}

func (u *unavailable) marksLocked(flavor string) *marks {
	m := u.flavors[flavor]
	if m == nil {
		m = &marks{}
		u.flavors[flavor] = m
	}
	return m
}

// markUnsupported remembers a flavor the apiserver refused, for flavorUnsupportedTTL from now.
func (u *unavailable) markUnsupported(flavor string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.marksLocked(flavor).unsupported = u.clock.Now().Add(flavorUnsupportedTTL)
}

// markRefused remembers a flavor the operator refused for a reason the provider cannot
// classify, backing off on repeats, and returns for how long.
func (u *unavailable) markRefused(flavor string) time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock.Now()
	m := u.marksLocked(flavor)
	switch {
	case m.backoff == 0 || now.Sub(m.refused) > maxRefusedTTL:
		// First refusal, or the flavor was offered for an hour since without being refused:
		// the streak is over.
		m.backoff = refusedTTL
	default:
		m.backoff = min(2*m.backoff, maxRefusedTTL)
	}
	m.refused = now.Add(m.backoff)
	return m.backoff
}

// launched ends a flavor's streak of unclassified refusals: the operator accepted it.
func (u *unavailable) launched(flavor string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if m := u.flavors[flavor]; m != nil && !u.clock.Now().Before(m.refused) {
		m.backoff = 0
	}
}

// snapshot returns the flavors currently marked, or nil.
func (u *unavailable) snapshot() map[string]bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock.Now()
	var out map[string]bool
	for f, m := range u.flavors {
		if now.Before(m.unsupported) || now.Before(m.refused) {
			if out == nil {
				out = map[string]bool{}
			}
			out[f] = true
			continue
		}
		if m.backoff == 0 || now.Sub(m.refused) > maxRefusedTTL {
			delete(u.flavors, f) // nothing left to remember, not even a streak
		}
	}
	return out
}
