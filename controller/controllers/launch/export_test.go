package launch

// The launch follower's metrics, for the tests to read.
var (
	LateRefusals      = lateRefusals
	TransientFailures = transientFailures
	LaunchesOverdue   = launchesOverdue
)
