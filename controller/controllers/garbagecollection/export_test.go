package garbagecollection

import "time"

// SetRemind changes how often a refused or resized group is reported again: the recorder
// deduplicates on real time, which a test cannot step like its fake clock.
func (c *Controller) SetRemind(d time.Duration) { c.remind = d }
