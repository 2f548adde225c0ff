package bench

import (
	"fmt"
	"testing"
	"time"
)

// MatchedFlavors are the flavors whose memory per vCPU is closest to the scale pods' (1.25 GB
// per vCPU on average: 240m CPU and 307Mi per pod over ScaleShapes): 2XS has 1 GB per vCPU,
// XS 1.33. L and XL have 2, so a node of theirs that the pods fill by CPU leaves a third of
// its memory paid for and idle.
var MatchedFlavors = []string{"2XS", "XS"}

// ScalePinned is the scale run on a NodePool pinned to flavors: the same pods, the same
// quota, only the NodePool's instance types differ. Beside the unpinned scale run it measures
// the cost of Karpenter core's packing (a batch of small pods fills the largest flavor that
// holds them) and the lever a user has against it (docs/cost.md).
func (b *Bench) ScalePinned(t *testing.T, name string, n int, timeout time.Duration, flavors []string) *Result {
	s := b.scenario(t)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, flavors, 10*time.Minute)
	b.LiftQuota()
	w := b.Open(s)
	if err := b.CreatePods(s, pool.Name, n, ScaleShapes); err != nil {
		t.Fatal(err)
	}
	ok := w.TL.WaitFor(s.Ctx, timeout, running(n))
	r := w.Close(name, fmt.Sprintf("%d bare pods (cycling 100m/128Mi, 250m/256Mi, 500m/512Mi, 100m/512Mi, 250m/128Mi) created at once by 16 workers, quota lifted, on a NodePool pinned to %v", n, flavors))
	r.Notes = append(r.Notes, "the controller process of the previous scenario, not restarted")
	if !ok {
		w.TL.Read(func(tl *Timeline) {
			_, up := countRunning(tl)
			r.Misses = append(r.Misses, fmt.Sprintf("only %d of %d pods Running within %s", up, n, timeout))
		})
	}
	b.cost(t, w, r)
	finish(s, r)
	b.Add(t, r)
	return r
}
