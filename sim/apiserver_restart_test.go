package sim_test

import (
	"fmt"
	"testing"
	"time"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
)

// The kube-apiserver is killed while a group waits for its decision and comes back after
// the decision was due: the operator's watches and its pending work resume, and the group
// gets its verdict, its node and Synced. (The operator used to record its decision in memory
// before the status write, so a write lost to the outage was never made again; and envtest's
// restart gave the apiserver a new serving CA no client trusted.)
func TestAPIServerRestartMidLaunch(t *testing.T) {
	configure(t, func(o *operator.Options) { o.DecisionDelay = 2 * time.Second })
	g := create(t, newGroup("restart", "2XS", 1))
	err := cluster.RestartAPIServer(func() {
		// Down across the decision: its write can only fail.
		<-time.After(3 * time.Second)
	})
	if err != nil {
		t.Fatalf("restarting the apiserver: %v", err)
	}
	eventually(t, 30*time.Second, func() error {
		if p := get(t, g.Name).Status.Phase; p != ngv1.PhaseCreating && p != ngv1.PhaseSynced {
			return fmt.Errorf("phase %q after the restart", p)
		}
		return nil
	})
	waitPhase(t, g.Name, ngv1.PhaseSynced)
	waitNodeReady(t, "restart-node0")
}
