package launch

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
