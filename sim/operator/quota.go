package operator

import (
	"fmt"
	"time"
)

// usage is an amount of the organisation quota: vCPUs and nominal GB.
type usage struct {
	CPU int64
	GB  int64
}

func (u usage) add(o usage) usage     { return usage{u.CPU + o.CPU, u.GB + o.GB} }
func (u usage) times(n int64) usage   { return usage{u.CPU * n, u.GB * n} }
func (u usage) fits(limit usage) bool { return u.CPU <= limit.CPU && u.GB <= limit.GB }

// quotaMessage renders a refusal the way CKE's quota engine worded it until 2026-06 (today's
// message is empty; Options.LegacyQuotaMessage brings this one back). RAM is checked
// first: with CKE's flavors (more GB than vCPUs) it is the limit groups hit in the field.
// The RAM figures carry one decimal, the CPU figures none, as in the field reports.
func quotaMessage(limit, actual usage) string {
	if actual.GB > limit.GB {
		return fmt.Sprintf("Quota exceeded: RAM max: limit = %.1f GB | actual = %.1f GB", float64(limit.GB), float64(actual.GB))
	}
	return fmt.Sprintf("Quota exceeded: CPU max: limit = %d | actual = %d", limit.CPU, actual.CPU)
}

// leak is a reservation the quota engine kept after the group that asked for it went away.
type leak struct {
	usage usage
	until time.Time
}

// batch is a set of creations the quota engine judges together (Options.QuotaBatchWindow).
type batch struct {
	// closesAt: creations from then on open the next batch; judgedAt: the engine's verdict.
	closesAt time.Time
	judgedAt time.Time
	members  map[string]usage // by group name
	decided  bool
	accepted bool
	actual   usage // the members' sum with everything already held
}
