package cke

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
)

// The simulator's flavor table is a copy of the controller's base catalogue; this keeps the
// two from drifting apart.
func TestFlavorsMatchBaseCatalogue(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "controller", "catalog", "base.json"))
	if err != nil {
		t.Fatalf("reading base catalogue: %v", err)
	}
	var base catalog.Base
	if err := json.Unmarshal(raw, &base); err != nil {
		t.Fatalf("decoding base catalogue: %v", err)
	}
	if len(base.Flavors) != len(flavors) {
		t.Errorf("base catalogue has %d flavors, simulator %d", len(base.Flavors), len(flavors))
	}
	for _, bf := range base.Flavors {
		got, ok := LookupFlavor(bf.Name)
		want := Flavor{Name: bf.Name, CPU: bf.CPU, MemoryKi: bf.MemoryKi, NominalGB: bf.NominalGB}
		if !ok || got != want {
			t.Errorf("flavor %s: simulator has %+v, base catalogue %+v", bf.Name, got, want)
		}
	}
	if base.Node.EphemeralStorageKi != EphemeralStorageKi || base.Node.Pods != MaxPods ||
		base.Node.KubeReservedMemoryKi != KubeReservedMemoryKi ||
		base.Node.EvictionHardEphemeralStorageKi != EvictionHardEphemeralStorageKi {
		t.Errorf("node shape differs from base catalogue: %+v", base.Node)
	}
}

func TestResources(t *testing.T) {
	capacity, allocatable := Resources(MustFlavor("S"))
	for name, want := range map[string]string{"cpu": "8", "memory": "11385832Ki", "ephemeral-storage": "40971488Ki", "pods": "110"} {
		q := capacity[corev1.ResourceName(name)]
		if q.String() != want {
			t.Errorf("capacity %s = %s, want %s", name, q.String(), want)
		}
	}
	for name, want := range map[string]string{"cpu": "8", "memory": "11283432Ki", "ephemeral-storage": "36874339Ki", "pods": "110"} {
		q := allocatable[corev1.ResourceName(name)]
		if q.String() != want {
			t.Errorf("allocatable %s = %s, want %s", name, q.String(), want)
		}
	}
}
