package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// QuotaSpec is a quota episode on the platform's bad days: the quota engine judges concurrent
// creations together and leaks refused reservations, as CKE's does, and the controller is not
// told the quota.
type QuotaSpec struct {
	Name, Description string
	// CPU and GB are the organisation quota; OtherCPU and OtherGB what the organisation's
	// other clusters use, unseen by the controller.
	CPU, GB, OtherCPU, OtherGB int64
	// Pods of 1 CPU / 1 Gi, one per node (each a 2XS).
	Pods int
	// Fit is how many of them the real headroom holds: every one must run.
	Fit int
	// MaxRefused is the most NodeGroups the quota engine may refuse over the window.
	MaxRefused int
	Window     time.Duration
}

// HostileQuotaEpisodes are the episodes the quota tracker exists for: demand beyond the
// headroom, an effective quota below CKE's default with leaks, a raised quota. The two S
// control-plane nodes use 16 vCPU / 24 GB.
func HostileQuotaEpisodes(window time.Duration) []QuotaSpec {
	return []QuotaSpec{{
		Name: "quota-binding", CPU: 40, GB: 40, Pods: 8, Fit: 4, MaxRefused: 1, Window: window,
		Description: "8 one-per-node pods of 1 CPU / 1 Gi against CKE's default 40 / 40 (room for four 2XS): the fifth goes as one probe",
	}, {
		// The first batch within CKE's default is refused together (the default was wrong);
		// after that, one probe per limit.
		Name: "quota-below-default-leaking", CPU: 40, GB: 40, OtherGB: 8, Pods: 6, Fit: 2, MaxRefused: 5, Window: window,
		Description: "6 one-per-node pods of 1 CPU / 1 Gi, another cluster of the organisation using 8 GB unseen (room for two 2XS), refused reservations leaking for 3 minutes",
	}, {
		Name: "quota-raised-unknown", CPU: 100, GB: 100, Pods: 14, Fit: 14, MaxRefused: 0, Window: window,
		Description: "14 one-per-node pods of 1 CPU / 1 Gi, quota raised to 100 / 100 and not configured: climbed one probe at a time",
	}}
}

// HostileQuotaEpisode runs one spec with batch judging and leaks on, and measures the NodeGroups
// refused and the time until every pod that fits runs.
func (b *Bench) HostileQuotaEpisode(t *testing.T, spec QuotaSpec) *Result {
	s, pool := b.setup(t, 10*time.Minute)
	s.AllowErrors(`Quota exceeded`, `does not fit`, `quota probe`, `could not schedule pod`)
	b.Env.Cluster.Operator().Configure(func(o *operator.Options) {
		o.QuotaCPU, o.QuotaRAMGB = spec.CPU, spec.GB
		o.OtherClusterCPU, o.OtherClusterGB = spec.OtherCPU, spec.OtherGB
		o.QuotaBatchWindow = max(o.QuotaBatchWindow, time.Second)
		o.LeakedReservationTTL = max(o.LeakedReservationTTL, 3*time.Minute)
	})
	b.Env.Cluster.Operator().ResetQuotaEngine()
	lease := b.restart(t, s, nil) // nothing learned from an earlier scenario
	w := b.Open(s)
	s.Deployment("quota", pool.Name, int32(spec.Pods), "1", "1Gi", harness.OnePerNode)
	deadline := time.Now().Add(spec.Window)
	w.TL.WaitFor(s.Ctx, spec.Window, func(tl *Timeline) bool { return time.Now().After(deadline) })
	r := w.Close(spec.Name, spec.Description+fmt.Sprintf(", watched for %s", spec.Window))
	r.Figures["leaseWaitAfterRestartSeconds"] = round3(lease.Seconds())
	w.TL.Read(func(tl *Timeline) {
		live, up := countRunning(tl)
		r.Figures["podsRunning"] = float64(up)
		r.Figures["podsPending"] = float64(live - up)
		var running []time.Time
		for _, p := range tl.Pods {
			if !p.Running.IsZero() {
				running = append(running, p.Running)
			}
		}
		if len(running) >= spec.Fit && spec.Fit > 0 {
			last := running[0]
			for _, at := range running {
				last = later(last, at)
			}
			r.Figures["everyFittingPodRunningSeconds"] = round3(last.Sub(w.Start).Seconds())
		}
		if up < spec.Fit {
			r.Misses = append(r.Misses, fmt.Sprintf("%d of the %d pods that fit the real headroom run", up, spec.Fit))
		}
	})
	if r.Rejected > spec.MaxRefused {
		r.Misses = append(r.Misses, fmt.Sprintf("%d NodeGroups refused by the quota engine, target ≤ %d", r.Rejected, spec.MaxRefused))
	}
	b.cost(t, w, r)
	finish(s, r)
	b.Add(t, r)
	return r
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
