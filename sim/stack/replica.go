package stack

import (
	"context"
	"fmt"
	"time"
)

// LeaseName is Karpenter core's leader-election Lease (LEADER_ELECTION_NAME's default), in
// SystemNamespace.
const LeaseName = "karpenter-leader-election"

// StartReplica starts another run of the controller beside Controller(), as the Deployment's
// second replica: same environment, its own ports and log, and it leads only once it holds
// the Lease. It waits for it to be healthy; the caller stops it.
func (e *Env) StartReplica(ctx context.Context, overrides map[string]string) (*Controller, error) {
	c, err := e.startHealthy(ctx, overrides)
	if err != nil {
		if c != nil {
			_ = c.Kill()
		}
		return nil, fmt.Errorf("replica: %w", err)
	}
	return c, nil
}

// Leads reads the controller's leader_election_master_status for LeaseName: whether this
// process leads. A controller that does not expose it yet is an error, not a follower.
func (c *Controller) Leads() (bool, error) {
	fams, err := c.Metrics()
	if err != nil {
		return false, err
	}
	const name = "leader_election_master_status"
	for _, m := range fams[name].GetMetric() {
		if matches(m, map[string]string{"name": LeaseName}) {
			return m.GetGauge().GetValue() == 1, nil
		}
	}
	return false, fmt.Errorf("%s{name=%q} is not exposed", name, LeaseName)
}

// ExitedAt is when the process was seen to end; zero while it runs.
func (c *Controller) ExitedAt() time.Time {
	select {
	case <-c.done:
		return c.exitedAt
	default:
		return time.Time{}
	}
}

// ExitWasExpected waits for the process to end and makes that exit its expected end: Stop then
// reports no error for it. For a scenario that makes the controller exit on purpose.
func (c *Controller) ExitWasExpected() {
	<-c.done
	c.killedByUs = true
	_ = c.logFile.Close()
}

// Done is closed when the process has ended.
func (c *Controller) Done() <-chan struct{} { return c.done }
