package quota

import "time"

// The tracker's tuning, for the tests to step clocks and fill windows by.
const (
	LearnedLimitTTL = learnedLimitTTL
	RefusalTTL      = refusalTTL
	DefaultDoubtTTL = defaultDoubtTTL
	ReservationTTL  = reservationTTL
	LeakTTL         = leakTTL
)

// Mutate switches off one rule the guarantees rest on (mutations.go), by the name
// docs/quota.md lists it under, until restore is called.
func Mutate(name string) (restore func(), ok bool) {
	old := mutations
	switch name {
	case "a refusal never forgotten":
		mutations.neverForget = true
	case "sure launches beside a probe in flight":
		mutations.sureBesideProbe = true
	case "a configured quota ignored":
		mutations.ignoreConfigured = true
	case "the tracker assuming 3 min of leak while the engine leaks up to 10":
		mutations.leakTTL = 3*time.Minute + 15*time.Second
	default:
		return func() {}, false
	}
	return func() { mutations = old }, true
}
