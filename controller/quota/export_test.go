package quota

// The tracker's tuning, for the tests to step clocks and fill windows by.
const (
	LearnedLimitTTL = learnedLimitTTL
	LowRefusalTTL   = lowRefusalTTL
	MaxProbeWindow  = maxProbeWindow
	ReservationTTL  = reservationTTL
	LeakTTL         = leakTTL
)

// Proven returns the proven lower bound of the limit (0 where nothing is proven).
func (t *Tracker) Proven() Usage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.floorLocked()
}
