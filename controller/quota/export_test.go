package quota

// The tracker's tuning, for the tests to step clocks and fill windows by.
const (
	LearnedLimitTTL = learnedLimitTTL
	RefusalTTL      = refusalTTL
	MaxRefusalTTL   = maxRefusalTTL
	ReservationTTL  = reservationTTL
	LeakTTL         = leakTTL
)
