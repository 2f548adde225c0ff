package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The performance suite's baseline (Config.Baseline, PERF_BASELINE=1) runs the suite against
// Karpenter core's own kwok provider (sigs.k8s.io/karpenter/kwok, the provider core's CI runs
// the suite with) in place of ours, on the same simulated control plane, harness and machine.
// kwok's provider creates each Node itself in Create, with nothing between the NodeClaim and
// the Node, so the baseline is what core alone achieves here: where it misses a time, heap or
// CPU threshold too, no provider meets it on this machine.

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
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "sigs.k8s.io/karpenter/kwok")
	cmd.Dir = filepath.Join(ModuleDir(), "suites")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building Karpenter core's kwok provider (go build in %s): %w\n%s", cmd.Dir, err, b)
	}
	return nil
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
