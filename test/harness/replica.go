package harness

import "github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"

// Replica starts a second controller beside the suite's, as the Deployment's other replica
// (stack.StartReplica). Its log is checked at cleanup like the suite's, and it is stopped when
// the test ends, before the scenario's cleanup: a replica that exited on its own fails the test.
func (s *Scenario) Replica(overrides map[string]string) *stack.Controller {
	s.T.Helper()
	c, err := s.Env.StartReplica(s.Ctx, overrides)
	s.must(err)
	s.marks[c] = 0
	s.T.Cleanup(func() {
		if err := c.Stop(); err != nil {
			s.T.Errorf("stopping the replica: %v", err)
		}
	})
	return c
}
