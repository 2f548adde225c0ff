package sim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
)

func TestPodsRunOnSimulatedNodes(t *testing.T) {
	ctx := context.Background()
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		NodeSelector: map[string]string{ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane},
		Containers:   []corev1.Container{{Name: "app", Image: "example.com/app"}},
	}}
	pod.Name, pod.Namespace = "runs", "default"
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	eventually(t, 30*time.Second, func() error {
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
			return fmt.Errorf("pod %s on %q", p.Status.Phase, p.Spec.NodeName)
		}
		return nil
	})
	if err := k8s.Delete(ctx, pod); err != nil {
		t.Fatalf("deleting pod: %v", err)
	}
	eventually(t, 30*time.Second, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod still there (%v)", err)
		}
		return nil
	})
}

// A pod labelled kwok.x-k8s.io/stage=unhealthy runs but never turns Ready, as a pod whose
// readiness probe fails; Karpenter core's suites label so the pods whose probe must fail.
func TestUnhealthyPodRunsUnready(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	flavor, _ := cke.LookupFlavor("2XS")
	n := cke.NewNode(cke.NodeSpec{Name: "podhealth", Flavor: flavor, Role: ngv1.NodeRoleWorker})
	if err := k8s.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	eventually(t, 30*time.Second, func() error { return readyIs(ctx, n.Name, corev1.ConditionTrue) })
	pods := map[string]map[string]string{
		"podhealth-unhealthy": {"kwok.x-k8s.io/stage": "unhealthy"},
		"podhealth-healthy":   nil,
	}
	for name, labels := range pods {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
			Spec: corev1.PodSpec{
				NodeName:    n.Name,
				Containers:  []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			},
		}
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), p, client.GracePeriodSeconds(0)) })
	}
	podState := func(name string) (corev1.PodPhase, corev1.ConditionStatus, error) {
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, p); err != nil {
			return "", "", err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return p.Status.Phase, c.Status, nil
			}
		}
		return p.Status.Phase, "", nil
	}
	for name, want := range map[string]corev1.ConditionStatus{"podhealth-healthy": corev1.ConditionTrue, "podhealth-unhealthy": corev1.ConditionFalse} {
		eventually(t, 30*time.Second, func() error {
			phase, ready, err := podState(name)
			if err != nil {
				return err
			}
			if phase != corev1.PodRunning || ready != want {
				return fmt.Errorf("pod %s: phase %s, Ready %q; want Running, Ready %s", name, phase, ready, want)
			}
			return nil
		})
	}
}
