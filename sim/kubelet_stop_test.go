package sim_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
)

// A stopped kubelet posts nothing, neither Lease renewals nor status: the node lifecycle
// controller (not the simulator) marks the node Unknown once its grace period has passed, as
// for a dead VM; the kubelet of another node goes on. Started again, it reports Ready.
func TestStopKubelet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const stopped, control = "kubelet-stopped", "kubelet-control"
	flavor, _ := cke.LookupFlavor("2XS")
	for _, name := range []string{stopped, control} {
		n := cke.NewNode(cke.NodeSpec{Name: name, Flavor: flavor, Role: ngv1.NodeRoleWorker})
		if err := k8s.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	}
	for _, name := range []string{stopped, control} {
		eventually(t, 30*time.Second, func() error {
			if err := readyIs(ctx, name, corev1.ConditionTrue); err != nil {
				return err
			}
			_, err := leaseRenewal(ctx, name)
			return err
		})
	}

	if err := cluster.StopKubelet(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	// The lifecycle controller declares a node Unknown at its first check after the grace
	// period since it last saw the Lease renewed; the margin is for its informers and a
	// loaded machine.
	deadline := sim.NodeMonitorGracePeriod + sim.NodeMonitorPeriod + 15*time.Second
	var ready corev1.NodeCondition
	eventually(t, deadline, func() error {
		n, err := getNode(stopped)
		if err != nil {
			return err
		}
		c := nodeReadyCondition(n)
		if c == nil {
			return fmt.Errorf("node %s has no Ready condition", stopped)
		}
		ready = *c
		if ready.Status != corev1.ConditionUnknown {
			return fmt.Errorf("node %s: Ready %s (%s) %s after StopKubelet, want Unknown", stopped, ready.Status, ready.Reason, time.Since(stoppedAt).Round(time.Second))
		}
		return nil
	})
	t.Logf("Ready Unknown %s after StopKubelet (grace period %s, checked every %s)",
		time.Since(stoppedAt).Round(100*time.Millisecond), sim.NodeMonitorGracePeriod, sim.NodeMonitorPeriod)
	if ready.Reason != "NodeStatusUnknown" || ready.Message != "Kubelet stopped posting node status." {
		t.Errorf("Ready Unknown with reason %q, message %q; want the node lifecycle controller's NodeStatusUnknown, %q",
			ready.Reason, ready.Message, "Kubelet stopped posting node status.")
	}
	// A renewal or a status kwok had already sent when the label landed may arrive just after;
	// anything later would be kwok still driving the node (it renews every 10 s).
	const inFlight = 2 * time.Second
	renewed, err := leaseRenewal(ctx, stopped)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("last Lease renewal %s after StopKubelet, Ready Unknown since %s after it",
		renewed.Sub(stoppedAt).Round(10*time.Millisecond), ready.LastTransitionTime.Sub(renewed).Round(time.Second))
	if renewed.After(stoppedAt.Add(inFlight)) {
		t.Errorf("Lease of %s renewed at %s, %s after StopKubelet", stopped, renewed.Format(time.RFC3339Nano), renewed.Sub(stoppedAt))
	}
	if hb := ready.LastHeartbeatTime.Time; hb.After(stoppedAt.Add(inFlight)) {
		t.Errorf("status of %s posted at %s, %s after StopKubelet", stopped, hb.Format(time.RFC3339), hb.Sub(stoppedAt))
	}
	// Not before the grace period had passed since the last renewal (transition times are
	// stored to the second).
	if since := ready.LastTransitionTime.Sub(renewed); since < sim.NodeMonitorGracePeriod-time.Second {
		t.Errorf("Ready turned Unknown %s after the last Lease renewal, before the grace period (%s)", since, sim.NodeMonitorGracePeriod)
	}
	// Only the chosen kubelet stopped.
	if err := readyIs(ctx, control, corev1.ConditionTrue); err != nil {
		t.Error(err)
	}
	if renewed, err := leaseRenewal(ctx, control); err != nil {
		t.Error(err)
	} else if !renewed.After(stoppedAt) {
		t.Errorf("Lease of %s, whose kubelet runs, last renewed at %s, before the other kubelet stopped", control, renewed.Format(time.RFC3339Nano))
	}
	// What Karpenter and the scheduler see of a dead VM.
	eventually(t, 2*sim.NodeMonitorPeriod, func() error { return unreachableTaints(stopped, true) })

	// Taken before the call: kwok renews the Lease as soon as the label is gone.
	startedAt := time.Now()
	if err := cluster.StartKubelet(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		if err := readyIs(ctx, stopped, corev1.ConditionTrue); err != nil {
			return err
		}
		renewed, err := leaseRenewal(ctx, stopped)
		if err != nil {
			return err
		}
		if renewed.Before(startedAt) {
			return fmt.Errorf("Lease of %s last renewed at %s, before StartKubelet", stopped, renewed.Format(time.RFC3339Nano))
		}
		return nil
	})
	t.Logf("Ready and Lease renewed %s after StartKubelet", time.Since(startedAt).Round(100*time.Millisecond))
	eventually(t, 2*sim.NodeMonitorPeriod+5*time.Second, func() error { return unreachableTaints(stopped, false) })
}

// unreachableTaints checks that the node lifecycle controller's unreachable taints, both
// effects, are on the node (want) or off it.
func unreachableTaints(name string, want bool) error {
	n, err := getNode(name)
	if err != nil {
		return err
	}
	for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
		has := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == corev1.TaintNodeUnreachable && t.Effect == effect
		})
		if has != want {
			return fmt.Errorf("node %s: taint %s:%s present %v, want %v", name, corev1.TaintNodeUnreachable, effect, has, want)
		}
	}
	return nil
}
