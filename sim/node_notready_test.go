package sim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
)

// A kubelet that reports its node NotReady (reason KubeletNotReady) keeps it so: the fake
// kubelet does not heal it, as it heals (brings up) a node with any other Ready status.
// Karpenter core's Repair specs inject exactly that report and expect it to hold.
func TestNotReadyReportHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	flavor, _ := cke.LookupFlavor("2XS")
	names := []string{"nodehealth-sick", "nodehealth-control"}
	for _, name := range names {
		n := cke.NewNode(cke.NodeSpec{Name: name, Flavor: flavor, Role: ngv1.NodeRoleWorker})
		if err := k8s.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	}
	for _, name := range names {
		eventually(t, 30*time.Second, func() error { return readyIs(ctx, name, corev1.ConditionTrue) })
	}
	// The sick node reports what a kubelet with a broken runtime reports; the control node a
	// NotReady with another reason, which the fake kubelet's start-up stage answers at once.
	injected := metav1.NewTime(time.Now().Add(-24 * time.Hour).Truncate(time.Second))
	setReady(t, ctx, "nodehealth-sick", "KubeletNotReady", injected)
	setReady(t, ctx, "nodehealth-control", "E2ETest", injected)
	eventually(t, 30*time.Second, func() error { return readyIs(ctx, "nodehealth-control", corev1.ConditionTrue) })
	// Wait for a status post after the report (22.5–27.5 s in this package's cluster): the
	// report must have survived it, its transition time too.
	since := time.Now()
	eventually(t, 60*time.Second, func() error {
		n := &corev1.Node{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "nodehealth-sick"}, n); err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeMemoryPressure && c.LastHeartbeatTime.After(since) {
				return nil
			}
		}
		return fmt.Errorf("no heartbeat on the sick node since %s yet", since.Format(time.RFC3339))
	})
	n := &corev1.Node{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "nodehealth-sick"}, n); err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && (c.Status != corev1.ConditionFalse || c.Reason != "KubeletNotReady" || !c.LastTransitionTime.Equal(&injected)) {
			t.Fatalf("the sick node's report did not survive a heartbeat: %+v (injected since %s)", c, injected)
		}
	}
}

func setReady(t *testing.T, ctx context.Context, name, reason string, since metav1.Time) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		n := &corev1.Node{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		before := n.DeepCopy()
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i] = corev1.NodeCondition{
					Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: reason, Message: "injected",
					LastHeartbeatTime: metav1.Now(), LastTransitionTime: since,
				}
			}
		}
		return k8s.Status().Patch(ctx, n, client.StrategicMergeFrom(before, client.MergeFromWithOptimisticLock{}))
	})
}
