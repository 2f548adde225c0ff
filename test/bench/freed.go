package bench

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// FreedQuotaSpec is the uptake episode: demand the platform cannot meet because another
// cluster of the organisation holds the room, until that cluster scales down at a time drawn
// from Seed. The controller is not told the quota and cannot see the other cluster: only a
// probe finds the room (docs/quota.md, G1).
type FreedQuotaSpec struct {
	Name, Description string
	// Seed draws the free's time, uniformly in [FreeFrom, FreeTo) after the pods are created.
	Seed             uint64
	FreeFrom, FreeTo time.Duration
	// OtherCPU and OtherGB are what the other cluster holds until the free, on CKE's default
	// 40 / 40 (the two S control-plane nodes use 16 / 24).
	OtherCPU, OtherGB int64
	// Pods of 1 CPU / 1 Gi, one per node (each a 2XS); every one fits once the room is free.
	Pods int
}

// FreedQuotaEpisode is the spec `make bench` runs: the other cluster holds the last 16 GB, so
// no 2XS fits; it frees them between one minute and one refusal memory (quota.RefusalMemory)
// into the demand, so the free falls anywhere in the wait that the first refusal started.
func FreedQuotaEpisode(seed uint64) FreedQuotaSpec {
	return FreedQuotaSpec{
		Name: "quota-freed-by-another-cluster", Seed: seed, FreeFrom: time.Minute, FreeTo: quota.RefusalMemory,
		OtherCPU: 8, OtherGB: 16, Pods: 4,
		Description: "4 one-per-node pods of 1 CPU / 1 Gi on CKE's default 40 / 40, another cluster of the organisation holding 8 vCPU / 16 GB unseen (no 2XS fits) until it scales down at a seeded random time; quota not configured, batch judging and leaks on",
	}
}

// FreedQuota runs spec and measures the time from the free to the first pod Running, and the
// NodeGroups the quota engine refused per hour of the episode. It ends once every pod runs,
// or quota.UptakeBound plus two of the latest joins after the free (a miss).
func (b *Bench) FreedQuota(t *testing.T, spec FreedQuotaSpec) *Result {
	s, pool := b.setup(t, 10*time.Minute)
	s.AllowErrors(`Quota exceeded`, `does not fit`, `quota probe`, `could not schedule pod`)
	b.Env.Cluster.Operator().Configure(func(o *operator.Options) {
		o.QuotaCPU, o.QuotaRAMGB = 40, 40
		o.OtherClusterCPU, o.OtherClusterGB = spec.OtherCPU, spec.OtherGB
		o.QuotaBatchWindow = max(o.QuotaBatchWindow, time.Second)
		o.LeakedReservationTTL = max(o.LeakedReservationTTL, 3*time.Minute)
	})
	s.T.Cleanup(func() {
		b.Env.Cluster.Operator().Configure(func(o *operator.Options) { o.OtherClusterCPU, o.OtherClusterGB = 0, 0 })
	})
	b.Env.Cluster.Operator().ResetQuotaEngine()
	lease := b.restart(t, s, nil) // nothing learned from an earlier scenario
	rng := rand.New(rand.NewPCG(spec.Seed, spec.Seed^0x9e3779b97f4a7c15))
	after := spec.FreeFrom + time.Duration(rng.Int64N(int64(spec.FreeTo-spec.FreeFrom)))

	w := b.Open(s)
	s.Deployment("freed", pool.Name, int32(spec.Pods), "1", "1Gi", harness.OnePerNode)
	freeAt := w.Start.Add(after)
	w.TL.WaitFor(s.Ctx, after, func(*Timeline) bool { return !time.Now().Before(freeAt) })
	var runningBefore int
	w.TL.Read(func(tl *Timeline) { _, runningBefore = countRunning(tl) })
	b.Env.Cluster.Operator().Configure(func(o *operator.Options) { o.OtherClusterCPU, o.OtherClusterGB = 0, 0 })
	freed := time.Now()
	// A wait, not a target: the latest join (the slow outlier on live) so that a relaunch
	// whose join was drawn late is not taken for a miss.
	limit := quota.UptakeBound + 2*w.ops.LatestJoinDelay()
	ok := w.TL.WaitFor(s.Ctx, limit, running(spec.Pods))
	r := w.Close(spec.Name, spec.Description+fmt.Sprintf(" (seed %d: freed %s into the demand)", spec.Seed, after.Round(time.Second)))
	r.Figures["leaseWaitAfterRestartSeconds"] = round3(lease.Seconds())
	r.Figures["seed"] = float64(spec.Seed)
	r.Figures["freedAfterSeconds"] = round3(freed.Sub(w.Start).Seconds())
	r.Figures["podsRunningBeforeFree"] = float64(runningBefore)
	if runningBefore > 0 {
		r.Misses = append(r.Misses, fmt.Sprintf("%d pods ran before the free: the demand was not unmet", runningBefore))
	}
	w.TL.Read(func(tl *Timeline) {
		var first time.Time
		for _, p := range tl.Pods {
			if !p.Running.IsZero() && (first.IsZero() || p.Running.Before(first)) {
				first = p.Running
			}
		}
		if !first.IsZero() {
			r.Figures["freeToFirstRunningSeconds"] = round3(first.Sub(freed).Seconds())
		}
		_, up := countRunning(tl)
		r.Figures["podsRunning"] = float64(up)
	})
	if !ok {
		r.Misses = append(r.Misses, fmt.Sprintf("not every pod Running within %s of the free (quota.UptakeBound + two joins)", limit))
	}
	r.Figures["refusedPerHour"] = round3(float64(r.Rejected) / (r.WallSeconds / 3600))
	b.cost(t, w, r)
	finish(s, r)
	b.Add(t, r)
	return r
}
