package sim_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

const reservedPrefixMessage = "Label keys with reserved prefixes (kubernetes.io/, node.kubernetes.io/, clever-cloud.com/) are not allowed"

// The served CRD is the platform's, field by field.
func TestCRDIsThePlatforms(t *testing.T) {
	ctx := context.Background()
	invalid := map[string]struct {
		g       *ngv1.NodeGroup
		message string
	}{
		"nodeCount above 16":       {newGroup("v-17", "S", 17), "spec.nodeCount"},
		"negative nodeCount":       {newGroup("v-neg", "S", -1), "spec.nodeCount"},
		"lowercase flavor":         {newGroup("v-lower", "s", 0), `Unsupported value: "s"`},
		"kubernetes.io/ label":     {withLabels(newGroup("v-k8s", "S", 0), map[string]string{"kubernetes.io/role": "x"}), reservedPrefixMessage},
		"node.kubernetes.io/label": {withLabels(newGroup("v-node", "S", 0), map[string]string{"node.kubernetes.io/x": "y"}), reservedPrefixMessage},
		"clever-cloud.com/ label":  {withLabels(newGroup("v-cc", "S", 0), map[string]string{"clever-cloud.com/flavor": "S"}), reservedPrefixMessage},
		"label value with space":   {withLabels(newGroup("v-space", "S", 0), map[string]string{"team": "a b"}), "spec.labels.team"},
		"label value of 64":        {withLabels(newGroup("v-long", "S", 0), map[string]string{"team": strings.Repeat("a", 64)}), "spec.labels.team"},
		"bad taint effect":         {withTaints(newGroup("v-effect", "S", 0), ngv1.Taint{Key: "k", Effect: "Sometimes"}), "spec.taints[0].effect"},
		"bad taint key":            {withTaints(newGroup("v-tkey", "S", 0), ngv1.Taint{Key: "-k", Effect: corev1.TaintEffectNoSchedule}), "spec.taints[0].key"},
		"bad taint value":          {withTaints(newGroup("v-tval", "S", 0), ngv1.Taint{Key: "k", Value: "a b", Effect: corev1.TaintEffectNoSchedule}), "spec.taints[0].value"},
	}
	for name, c := range invalid {
		err := k8s.Create(ctx, c.g)
		if err == nil {
			deleteAndWait(t, c.g.Name)
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.message) {
			t.Errorf("%s: want Invalid naming %q, got %v", name, c.message, err)
		}
	}

	// A flavor outside the enum: 422 naming the supported values, as the platform answers.
	err := k8s.Create(ctx, newGroup("v-2xl", "2XL", 1))
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != http.StatusUnprocessableEntity ||
		!strings.Contains(err.Error(), `spec.flavor: Unsupported value: "2XL": supported values: "2XS", "XS", "S", "M", "L", "XL"`) {
		t.Errorf("2XL flavor: want 422 naming the supported values, got %v", err)
	}
	if err == nil {
		deleteAndWait(t, "v-2xl")
	}

	// No key-format rule on labels: only the reserved prefixes are refused.
	create(t, withLabels(newGroup("v-anykey", "S", 0), map[string]string{"-odd": "x"}))

	// The object requires spec, but an empty spec is valid: flavor M, nodeCount 0. (The Go
	// type always sends flavor, so this goes unstructured.)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ngv1.GroupVersion.String(), "kind": "NodeGroup",
		"metadata": map[string]any{"name": "v-empty"}, "spec": map[string]any{},
	}}
	if err := k8s.Create(ctx, u); err != nil {
		t.Fatalf("empty spec: %v", err)
	}
	t.Cleanup(func() { deleteAndWait(t, "v-empty") })
	if g := get(t, "v-empty"); g.Spec.Flavor != "M" || g.Spec.NodeCount != 0 {
		t.Errorf("empty spec defaulted to %+v, want flavor M, nodeCount 0", g.Spec)
	}
	nospec := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ngv1.GroupVersion.String(), "kind": "NodeGroup", "metadata": map[string]any{"name": "v-nospec"},
	}}
	if err := k8s.Create(ctx, nospec); !apierrors.IsInvalid(err) {
		t.Errorf("no spec: want Invalid, got %v", err)
		if err == nil {
			deleteAndWait(t, "v-nospec")
		}
	}

	// Immutability is self == oldSelf on each field, with the platform's messages.
	g := create(t, withTaints(withLabels(newGroup("v-ok", "S", 0), map[string]string{"team": "a", "example.com/tier": "gold"}),
		ngv1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}))
	for name, c := range map[string]struct {
		mutate  func(*ngv1.NodeGroup)
		message string
	}{
		"flavor change": {func(g *ngv1.NodeGroup) { g.Spec.Flavor = "M" }, "flavor is immutable"},
		"label change":  {func(g *ngv1.NodeGroup) { g.Spec.Labels["team"] = "b" }, "labels are immutable after creation"},
		"taint change":  {func(g *ngv1.NodeGroup) { g.Spec.Taints[0].Value = "y" }, "taints are immutable after creation"},
	} {
		if err := update(t, g.Name, c.mutate); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.message) {
			t.Errorf("%s: want Invalid %q, got %v", name, c.message, err)
		}
	}
	if err := update(t, g.Name, func(g *ngv1.NodeGroup) { g.Spec.NodeCount = 2 }); err != nil {
		t.Errorf("changing nodeCount: %v", err)
	}
	// No presence pinning: what was absent can be added, what was present removed.
	create(t, newGroup("v-bare", "S", 0))
	if err := update(t, "v-bare", func(g *ngv1.NodeGroup) {
		g.Spec.Taints = []ngv1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
	}); err != nil {
		t.Errorf("adding taints to a group created without them: %v", err)
	}
	if err := update(t, "v-bare", func(g *ngv1.NodeGroup) { g.Spec.Labels = map[string]string{"team": "a"} }); err != nil {
		t.Errorf("adding labels to a group created without them: %v", err)
	}
	if err := update(t, g.Name, func(g *ngv1.NodeGroup) { g.Spec.Labels = nil }); err != nil {
		t.Errorf("removing labels: %v", err)
	}
}
