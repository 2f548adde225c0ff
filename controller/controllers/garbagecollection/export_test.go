package garbagecollection

import (
	"context"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// SetRemind changes how often a refused or resized group is reported again: the recorder
// deduplicates on real time, which a test cannot step like its fake clock.
func (c *Controller) SetRemind(d time.Duration) { c.remind = d }

// Collect runs one pass, for tests that drive the collector pass by pass instead of its loop.
func (c *Controller) Collect(ctx context.Context) error { return c.collect(ctx) }

// Refused reads the refused gauge for a reason.
func Refused(reason string) float64 {
	var m dto.Metric
	if err := garbageRefused.WithLabelValues(reason).Write(&m); err != nil {
		panic(err)
	}
	return m.GetGauge().GetValue()
}

// KickIfAwaitingRegistration is the claim informer's handler.
func (c *Controller) KickIfAwaitingRegistration(obj any) { c.kickIfAwaitingRegistration(obj) }

// Kicked reports, and takes, a pending kick.
func (c *Controller) Kicked() bool {
	select {
	case <-c.kicks:
		return true
	default:
		return false
	}
}
