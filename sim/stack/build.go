package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinaryEnv names a controller binary built beforehand. `make test` and the other Makefile
// targets that run the stack build it once with `make build`, outside every test deadline,
// and pass its path here; without it each process builds its own.
const BinaryEnv = "KARPENTER_CLEVERCLOUD_BINARY"

// ControllerBinary returns the binary BinaryEnv names, or builds the working tree's controller
// into dir.
func ControllerBinary(ctx context.Context, dir string) (string, error) {
	if path := os.Getenv(BinaryEnv); path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("%s: %w", BinaryEnv, err)
		}
		return path, nil
	}
	return BuildController(ctx, ModuleRoot(), dir)
}

// BuildController builds the controller of the source tree src (this repository, at any
// commit) into dir, linked with ldflags if any, and returns its path.
func BuildController(ctx context.Context, src, dir string, ldflags ...string) (string, error) {
	out := filepath.Join(dir, "karpenter-clevercloud")
	// The flags `make build` uses (-trimpath, no cgo): the packages' compiled forms are then
	// shared with it through Go's build cache, whatever the source tree's path, and a variant
	// such as the repair controller costs a link, not a rebuild of Karpenter and client-go.
	args := []string{"build", "-trimpath", "-o", out}
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
