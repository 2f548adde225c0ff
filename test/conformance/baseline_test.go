package conformance

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kwokv1alpha1 "sigs.k8s.io/karpenter/kwok/apis/v1alpha1"
	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	kwokoptions "sigs.k8s.io/karpenter/kwok/options"
)

// TestKwokInstanceTypesAreCKEFlavors loads the baseline's instance-types file with the kwok
// provider's own loader and checks that each instance type has the allocatable, price and
// offerings the provider gives the flavor: the baseline packs pods onto the same nodes.
func TestKwokInstanceTypesAreCKEFlavors(t *testing.T) {
	data, err := KwokInstanceTypes()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "types.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := kwok.ConstructInstanceTypes(kwokoptions.ToContext(t.Context(), &kwokoptions.Options{InstanceTypesFilePath: path}))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := ckeCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	want := cat.InstanceTypes()
	if len(got) != len(want) {
		t.Fatalf("kwok loaded %d instance types, the catalogue has %d flavors", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name {
			t.Errorf("instance type %d is %s, want %s", i, g.Name, w.Name)
			continue
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			ga, wa := g.Allocatable()[r], w.Allocatable()[r]
			if r == corev1.ResourceCPU {
				// Whole vCPUs, less the 100m kwok reserves (KwokInstanceTypes says why).
				wa = w.Capacity[r]
				wa.Sub(kwokReserved[r])
			}
			if ga.Cmp(wa) != 0 {
				t.Errorf("%s: kwok's allocatable %s = %s, want %s", w.Name, r, ga.String(), wa.String())
			}
		}
		// The suite's NodePool on kwok requires an instance size under 32, a number.
		size := g.Requirements.Get(kwokv1alpha1.InstanceSizeLabelKey).Any()
		if n, err := strconv.Atoi(size); err != nil || n >= 32 {
			t.Errorf("%s: kwok's instance-size label %q is not a number under 32, which the suite's NodePool requires", w.Name, size)
		}
		if len(g.Offerings) != len(w.Offerings) {
			t.Errorf("%s: %d offerings, want %d", w.Name, len(g.Offerings), len(w.Offerings))
			continue
		}
		for j, o := range w.Offerings {
			if g.Offerings[j].Price != o.Price || g.Offerings[j].Requirements.Compatible(o.Requirements) != nil {
				t.Errorf("%s offering %d: price %v, requirements %v; want %v, %v", w.Name, j, g.Offerings[j].Price, g.Offerings[j].Requirements, o.Price, o.Requirements)
			}
		}
	}
}
