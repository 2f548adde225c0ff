package sim_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

// snapshot is one status a group was seen with, and when.
type snapshot struct {
	at     time.Time
	status ngv1.NodeGroupStatus
}

// history records every version of one group, from before its creation.
type history struct {
	mu    sync.Mutex
	snaps []snapshot
}

func record(t *testing.T, name string) *history {
	t.Helper()
	w, err := k8s.Watch(context.Background(), &ngv1.NodeGroupList{}, client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatalf("watching NodeGroup %q: %v", name, err)
	}
	t.Cleanup(w.Stop)
	h := &history{}
	go func() {
		for ev := range w.ResultChan() {
			if g, ok := ev.Object.(*ngv1.NodeGroup); ok {
				h.mu.Lock()
				h.snaps = append(h.snaps, snapshot{at: time.Now(), status: g.Status})
				h.mu.Unlock()
			}
		}
	}()
	return h
}

// writes are the distinct non-empty statuses seen, in order.
func (h *history) writes() []snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []snapshot
	for _, s := range h.snaps {
		if s.status.Phase == "" && len(s.status.Conditions) == 0 {
			continue
		}
		if len(out) > 0 && fmt.Sprint(out[len(out)-1].status) == fmt.Sprint(s.status) {
			continue
		}
		out = append(out, s)
	}
	return out
}

func hasCondition(s ngv1.NodeGroupStatus, t string, status metav1.ConditionStatus, reason string) bool {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status == status && c.Reason == reason
		}
	}
	return false
}

func hasConditionMessage(s ngv1.NodeGroupStatus, t string, status metav1.ConditionStatus, reason, message string) bool {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status == status && c.Reason == reason && c.Message == message
		}
	}
	return false
}
