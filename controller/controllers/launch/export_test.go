package launch

import "k8s.io/apimachinery/pkg/types"

// The launch follower's metrics, for the tests to read.
var (
	LateRefusals      = lateRefusals
	TransientFailures = transientFailures
	LaunchesOverdue   = launchesOverdue
	LaunchesGivenUp   = launchesGivenUp
)

// The give-up rules, as the metric labels them.
const (
	RuleOperatorStopped = ruleOperatorStopped
	RuleNoNode          = ruleNoNode
)

// Overdue is the number of followed launches currently overdue, which the gauge publishes.
func (c *Controller) Overdue() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overdueLocked()
}

// Ended says the follower considers the launch of the claim with this UID ended.
func (c *Controller) Ended(uid types.UID) bool { return c.ended.Has(uid) }
