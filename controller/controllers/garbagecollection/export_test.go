package garbagecollection

import (
	"context"
	"time"
)

// SetRemind changes how often a refused or resized group is reported again: the recorder
// deduplicates on real time, which a test cannot step like its fake clock.
func (c *Controller) SetRemind(d time.Duration) { c.remind = d }

// Collect runs one pass, for tests that drive the collector pass by pass instead of its loop.
func (c *Controller) Collect(ctx context.Context) error { return c.collect(ctx) }
