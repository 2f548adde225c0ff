package harness

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func TestOnlyTheScenariosOwnPoolsMayBeNotReadyYet(t *testing.T) {
	line := func(pool string) string {
		return `{"level":"ERROR","time":"2026-12-02T00:20:46.432Z","logger":"controller","message":"ignoring nodepool, not ready","controller":"provisioner","NodePool":{"name":"` + pool + `"}}`
	}
	applied := &unstructured.Unstructured{}
	applied.SetKind("NodePool")
	applied.SetName("large")
	sc := &Scenario{}
	sc.Track(&karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "mine"}})
	sc.Track(applied)
	for pool, want := range map[string]bool{"mine": true, "large": true, "someone-elses": false} {
		if got := sc.ownPoolNotReadyYet(line(pool)); got != want {
			t.Errorf("pool %s: allowed = %v, want %v", pool, got, want)
		}
	}
	if sc.ownPoolNotReadyYet(`{"level":"ERROR","message":"could not schedule pod","NodePool":{"name":"mine"}}`) {
		t.Error("another error line about the pool was allowed")
	}
}
