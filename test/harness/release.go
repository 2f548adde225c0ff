package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// What the lifecycle suite (test/lifecycle) needs to install one release over another: the
// controller of any commit of this repository, and a bundle and binary swapped under a
// running Env, as an upgrade swaps manifests and image.

// BuildControllerFrom builds the controller of the source tree src (this repository at any
// commit) into dir, the way BuildController builds the working tree's, and returns its path.
func BuildControllerFrom(ctx context.Context, src, dir string, ldflags ...string) (string, error) {
	out := filepath.Join(dir, "karpenter-clevercloud")
	args := []string{"build", "-o", out}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags", strings.Join(ldflags, " "))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./controller")...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./controller in %s: %w\n%s", src, err, b)
	}
	return out, nil
}

// ApplyBundle applies b over whatever is installed, as `kubectl apply -f install.yaml` does for
// an install or an upgrade: its CRDs, then, once they are served, its controller objects (all
// but the workload's, as Start). Fields an earlier bundle applied and b no longer has are
// removed (same field manager). The next controller start takes b's Deployment environment.
func (e *Env) ApplyBundle(ctx context.Context, b *Bundle) error {
	e.Bundle = b
	return e.applyBundle(ctx)
}

// UseBinary makes every later controller start run binary: the image of another release.
func (e *Env) UseBinary(binary string) { e.binary = binary }
