package preflight

import (
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
)

// RuntimePeriod is how often the running controller repeats its checks: each run lists CRDs,
// Deployments, NodeGroups and Nodes uncached, cheap at this pace, and none of what they watch
// for changes faster than an operator reacts to an alert.
const RuntimePeriod = 5 * time.Minute

// Runner repeats the RuntimeChecks in the running controller, publishes them as the
// karpenter_clevercloud_preflight_check gauge and logs each check when its result changes.
// It reads only what the bundle's RBAC grants (RuntimeScope) and writes nothing.
type Runner struct {
	cluster Cluster
	period  time.Duration
	log     logr.Logger
	last    map[string]Result
}

// NewRunner builds a Runner; add it to the manager.
func NewRunner(c Cluster, period time.Duration, log logr.Logger) *Runner {
	return &Runner{cluster: c, period: period, log: log, last: map[string]Result{}}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the leader reads, one set
// of lists per period for the whole install.
func (r *Runner) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: a run at once, then one per period until ctx ends.
func (r *Runner) Start(ctx context.Context) error {
	tick := time.NewTicker(r.period)
	defer tick.Stop()
	for {
		r.RunOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// RunOnce runs the checks once, publishes and logs them, and returns the report (empty when
// the cluster could not be read at all, which is logged).
func (r *Runner) RunOnce(ctx context.Context) Report {
	s, err := Gather(ctx, r.cluster, RuntimeScope)
	if err != nil {
		// Info: an apiserver restart is not the controller's error; the gauge keeps its last
		// values and the next period tries again.
		r.log.Info("preflight checks could not read the cluster", "error", err.Error())
		return nil
	}
	var report Report
	for _, c := range Evaluate(s, nil) {
		if slices.Contains(RuntimeChecks, c.Name) {
			report = append(report, c)
		}
	}
	publish(report)
	for _, c := range report {
		if r.last[c.Name] == c.Result {
			continue
		}
		r.last[c.Name] = c.Result
		// Info even on fail: the gauge is what alerts; a failed check is the cluster's state,
		// not an error of the controller's.
		r.log.Info("preflight check", "check", c.Name, "result", string(c.Result), "found", c.Found, "action", c.Action)
	}
	return report
}
