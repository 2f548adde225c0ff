package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// The performance suite's baseline (Config.Baseline, PERF_BASELINE=1) runs the suite against
// Karpenter core's own kwok provider (sigs.k8s.io/karpenter/kwok, the provider core's CI runs
// the suite with) in place of ours, on the same simulated control plane, harness and machine,
// with CKE's flavors as its instance types (KwokInstanceTypes). kwok's provider creates each
// Node itself in Create, with nothing between the NodeClaim and the Node, so the baseline is
// what core alone achieves here with the nodes CKE sells: where it misses a time, heap or CPU
// threshold too, no provider meets it on this machine. With kwok's built-in instance types,
// up to hundreds of vCPU each, the suite's pods need a quarter of the nodes.

// BaselineDir holds the baseline's NodeClass, NodePool and extra RBAC.
func BaselineDir() string { return filepath.Join(ModuleDir(), "baseline") }

// KarpenterModuleDir is where the pinned Karpenter core module is, downloaded if it is not
// yet (go mod download says where).
func KarpenterModuleDir(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "sigs.k8s.io/karpenter")
	cmd.Dir = filepath.Join(ModuleDir(), "suites")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding the pinned karpenter module (go mod download in %s): %w", cmd.Dir, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download -json sigs.k8s.io/karpenter: %v (%s)", err, out)
	}
	return mod.Dir, nil
}

// BuildKwokProvider builds core's kwok provider at the pinned version into out.
func BuildKwokProvider(ctx context.Context, out string) error {
	return buildFromCore(ctx, "Karpenter core's kwok provider", "build", "-o", out, "sigs.k8s.io/karpenter/kwok")
}

// kwokInstanceType is an entry of the kwok provider's instance-types file
// (InstanceTypeOptions in sigs.k8s.io/karpenter/kwok/cloudprovider).
type kwokInstanceType struct {
	Name             string              `json:"name"`
	Offerings        []kwokOffering      `json:"offerings"`
	Architecture     string              `json:"architecture"`
	OperatingSystems []string            `json:"operatingSystems"`
	Resources        corev1.ResourceList `json:"resources"`
}

type kwokOffering struct {
	Price        float64                          `json:"Price"`
	Available    bool                             `json:"Available"`
	Requirements []corev1.NodeSelectorRequirement `json:"Requirements"`
}

// kwokReserved is what the kwok provider reserves on every instance type (newInstanceType).
var kwokReserved = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("10Mi")}

// KwokInstanceTypes is the kwok provider's instance-types file for CKE's flavors: each flavor's
// price, offerings, pods, and memory allocatable as the provider computes it (plus what kwok
// reserves, so kwok's is the same). CPU is the flavor's whole vCPUs: kwok labels an instance
// type's size with its CPU quantity and the suite keeps sizes under 32 with a numeric
// requirement, which a fractional quantity fails. kwok's CPU allocatable is then 100m short of
// the provider's, which moves no packing of the suite's pods: memory binds them on every flavor.
func KwokInstanceTypes() ([]byte, error) {
	cat, err := ckeCatalogue()
	if err != nil {
		return nil, err
	}
	var out []kwokInstanceType
	for _, it := range cat.InstanceTypes() {
		a := it.Allocatable()
		mem := a[corev1.ResourceMemory]
		mem.Add(kwokReserved[corev1.ResourceMemory])
		res := corev1.ResourceList{corev1.ResourcePods: a[corev1.ResourcePods], corev1.ResourceMemory: mem, corev1.ResourceCPU: it.Capacity[corev1.ResourceCPU]}
		k := kwokInstanceType{Name: it.Name, Architecture: "amd64", OperatingSystems: []string{"linux"}, Resources: res}
		for _, o := range it.Offerings {
			off := kwokOffering{Price: o.Price, Available: true}
			for _, key := range []string{karpv1.CapacityTypeLabelKey, corev1.LabelTopologyZone} {
				off.Requirements = append(off.Requirements, corev1.NodeSelectorRequirement{
					Key: key, Operator: corev1.NodeSelectorOpIn, Values: o.Requirements.Get(key).Values(),
				})
			}
			k.Offerings = append(k.Offerings, off)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, errors.New("the catalogue has no flavor")
	}
	return json.MarshalIndent(out, "", "  ")
}

// baselineExtra are the files the baseline applies beyond the bundle: kwok's NodeClass CRD,
// from the pinned module, and the access its provider needs.
func baselineExtra(ctx context.Context) ([]string, error) {
	dir, err := KarpenterModuleDir(ctx)
	if err != nil {
		return nil, err
	}
	return []string{
		filepath.Join(dir, "kwok", "apis", "crds", "karpenter.kwok.sh_kwoknodeclasses.yaml"),
		filepath.Join(BaselineDir(), "access.yaml"),
	}, nil
}
