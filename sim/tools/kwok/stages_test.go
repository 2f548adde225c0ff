package kwok_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/utils/gotpl"
	"sigs.k8s.io/kwok/pkg/utils/lifecycle"
)

// The simulated CKE's stages, read by kwok's own loader and played by kwok's own selector,
// renderer and (for Nodes) strategic merge patch, as the kwok binary built from this module
// plays them. The simulator's integration tests cannot make kwok's races happen on demand;
// here they are played out directly.
const stagesFile = "../../controlplane/kwok-stages.yaml"

func nodeLifecycle(t *testing.T) lifecycle.Lifecycle {
	t.Helper()
	objs, err := config.Load(context.Background(), stagesFile)
	if err != nil {
		t.Fatalf("loading %s: %v", stagesFile, err)
	}
	var stages []*internalversion.Stage
	for _, obj := range objs {
		if s, ok := obj.(*internalversion.Stage); ok && s.Spec.ResourceRef.Kind == "Node" {
			stages = append(stages, s)
		}
	}
	if len(stages) == 0 {
		t.Fatalf("%s has no Node stages", stagesFile)
	}
	lc, err := lifecycle.NewLifecycle(stages)
	if err != nil {
		t.Fatal(err)
	}
	return lc
}

var created = metav1.NewTime(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))

func nodeWithReady(status corev1.ConditionStatus, reason string, since metav1.Time) *corev1.Node {
	n := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: created},
	}
	if status != "" {
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: status, Reason: reason, LastHeartbeatTime: since, LastTransitionTime: since},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: created, LastTransitionTime: created},
		}
	}
	return n
}

func matching(t *testing.T, lc lifecycle.Lifecycle, n *corev1.Node) []string {
	t.Helper()
	stages, err := lc.ListAllPossible(context.Background(), &lifecycle.Event{Labels: n.Labels, Annotations: n.Annotations, Data: n})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range stages {
		names = append(names, s.Name())
	}
	return names
}

// Exactly one stage holds a node in each Ready state: a node kwok brought up and one whose
// kubelet reported KubeletNotReady get status posts; any other state is brought (back) up.
func TestEveryNodeStateHasOneStage(t *testing.T) {
	lc := nodeLifecycle(t)
	for _, tc := range []struct {
		name   string
		status corev1.ConditionStatus
		reason string
		want   string
	}{
		{"Ready", corev1.ConditionTrue, "KubeletReady", "cke-node-heartbeat"},
		{"reported NotReady", corev1.ConditionFalse, "KubeletNotReady", "cke-node-heartbeat"},
		{"NotReady for another reason", corev1.ConditionFalse, "E2ETest", "cke-node-ready"},
		{"Unknown", corev1.ConditionUnknown, "NodeStatusUnknown", "cke-node-ready"},
		{"just registered", "", "", "cke-node-ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := matching(t, lc, nodeWithReady(tc.status, tc.reason, created))
			if !slices.Equal(got, []string{tc.want}) {
				t.Errorf("stages %v, want [%s]", got, tc.want)
			}
		})
	}
}

// statusPost renders the status post kwok schedules for snapshot and applies it, as kwok's
// node controller does (a strategic merge patch of the status), to current: the node as it
// is when the post lands, which may have changed since the snapshot.
func statusPost(t *testing.T, lc lifecycle.Lifecycle, snapshot, current *corev1.Node) *corev1.Node {
	t.Helper()
	names := matching(t, lc, snapshot)
	if !slices.Equal(names, []string{"cke-node-heartbeat"}) {
		t.Fatalf("the snapshot is held by %v, not the status post", names)
	}
	stage, err := lc.Match(context.Background(), &lifecycle.Event{Data: snapshot})
	if err != nil {
		t.Fatal(err)
	}
	renderer := gotpl.NewRenderer(gotpl.FuncMap{"NodeIP": func() string { return "10.0.0.1" }})
	var patches []*lifecycle.Patch
	if _, err := stage.DoSteps(0, nil, snapshot, renderer,
		func(*internalversion.StageEvent) error { return nil },
		func() error { t.Fatal("a status post deletes the node"); return nil },
		func(p *lifecycle.Patch) error { patches = append(patches, p); return nil },
		func(*lifecycle.Apply) error { t.Fatal("a status post applies"); return nil },
	); err != nil {
		t.Fatal(err)
	}
	if len(patches) != 1 || patches[0].Subresource != "status" {
		t.Fatalf("want one status patch, got %+v", patches)
	}
	orig, err := json.Marshal(current)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(orig, patches[0].Data, corev1.Node{})
	if err != nil {
		t.Fatalf("applying %s: %v", patches[0].Data, err)
	}
	out := &corev1.Node{}
	if err := json.Unmarshal(merged, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func condition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// A status post kwok rendered before a Ready report changed the node lands after it (it was
// due, or kwok missed cancelling it): the report stands, and so does the reverse. Before,
// the post rewrote Ready from kwok's defaults, a reported node was Ready again 20–45 s later,
// and Karpenter core's repair saw one unhealthy node where there were two.
func TestAStatusPostNeverUndoesAReadyReport(t *testing.T) {
	lc := nodeLifecycle(t)
	reported := metav1.NewTime(created.Add(time.Minute))
	ready := nodeWithReady(corev1.ConditionTrue, "KubeletReady", created)
	notReady := nodeWithReady(corev1.ConditionFalse, "KubeletNotReady", reported)

	for _, tc := range []struct {
		name              string
		snapshot, current *corev1.Node
	}{
		{"a post scheduled while Ready, on a node since reported NotReady", ready, notReady},
		{"a post scheduled while NotReady, on a node since reported Ready", notReady, ready},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := condition(tc.current, corev1.NodeReady)
			after := statusPost(t, lc, tc.snapshot, tc.current)
			got := condition(after, corev1.NodeReady)
			if got == nil || got.Status != before.Status || got.Reason != before.Reason || !got.LastTransitionTime.Equal(&before.LastTransitionTime) {
				t.Errorf("Ready after the post %+v, want it as reported %+v", got, *before)
			}
			// It is still a status post: the other conditions are refreshed.
			if mem := condition(after, corev1.NodeMemoryPressure); mem == nil || !mem.LastHeartbeatTime.After(created.Time) {
				t.Errorf("MemoryPressure after the post %+v, want a fresh heartbeat", mem)
			}
		})
	}
}
