package pricing

import "time"

// WithRequestTimeout bounds each HTTP request (DefaultRequestTimeout otherwise).
func WithRequestTimeout(d time.Duration) Option { return func(x *Refresher) { x.timeout = d } }

// WithJitterSource replaces the random source of the jitter; fn returns a value in [0, 1).
func WithJitterSource(fn func() float64) Option { return func(x *Refresher) { x.random = fn } }
