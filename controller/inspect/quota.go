package inspect

import (
	"fmt"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// quotaUse is the use the tracker judges a launch against: what is counted now and every
// reservation it still suspects leaked.
func quotaUse(s *quota.Snapshot, counted quota.Usage, now time.Time) quota.Usage {
	used := counted
	for _, l := range s.Leaks {
		if now.Before(l.Until) {
			used = used.Add(l.Use)
		}
	}
	return used
}

// quotaVerdict says why the saved quota state keeps a launch of size from being made now, as
// the controller's tracker judges it (quota.Tracker.Blocked): beyond the known limit, at or
// beyond a refused use in both resources, or a probe while a refused reservation may still
// leak. Empty when nothing known keeps it out.
func quotaVerdict(s *quota.Snapshot, counted, size quota.Usage, now time.Time) string {
	if s == nil {
		return ""
	}
	used := quotaUse(s, counted, now)
	after := used.Add(size)
	if (s.Limit.CPU > 0 && after.CPU > s.Limit.CPU) || (s.Limit.GB > 0 && after.GB > s.Limit.GB) {
		headroom := quota.Usage{CPU: 1 << 40, GB: 1 << 40}
		if s.Limit.CPU > 0 {
			headroom.CPU = s.Limit.CPU - used.CPU
		}
		if s.Limit.GB > 0 {
			headroom.GB = s.Limit.GB - used.GB
		}
		return fmt.Sprintf("charges %s, beyond the headroom %s (limit %s, in use %s)", size, quota.FormatHeadroom(headroom), s.Limit, used)
	}
	for _, r := range s.Refused {
		if now.Before(r.Until) && r.Use.FitsIn(after) {
			return fmt.Sprintf("charges %s, bringing the use to %s, at or beyond the refused use %s, not tried again before %s", size, after, r.Use, stamp(r.Until))
		}
	}
	if !after.FitsIn(s.Sure) && now.Before(s.NextProbe) {
		return fmt.Sprintf("charges %s, bringing the use to %s, beyond what launches fly together on (%s): a probe, not sent before %s while a refused reservation may still leak", size, after, s.Sure, stamp(s.NextProbe))
	}
	return ""
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
