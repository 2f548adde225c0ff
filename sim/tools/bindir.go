// Package tools finds the simulated CKE's pinned binaries (etcd, kube-apiserver,
// kube-scheduler, kube-controller-manager, kubectl, kwok). It sits beside build.sh, which
// builds them, so every caller (sim/testenv, sim/stack, the simulator's own tests) finds them
// the same way and a plain `go test` on a fresh clone builds them instead of skipping.
package tools

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// AssetsEnv names the folder of prebuilt binaries; `make test` sets it from build.sh's output.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// BinDir returns $KUBEBUILDER_ASSETS when set; otherwise it runs build.sh, which builds the
// binaries into a cache folder named for their pins (a no-op once built), and returns that
// folder. The build runs at most once per process: several suites of one test binary, or a
// stack started twice, would otherwise each pay build.sh's hashing of the pins.
func BinDir() (string, error) {
	if dir := os.Getenv(AssetsEnv); dir != "" {
		return dir, nil
	}
	return built()
}

var built = sync.OnceValues(func() (string, error) {
	script := filepath.Join(here(), "build.sh")
	cmd := exec.Command(script)
	// A cold build takes minutes; its progress lines tell a waiting developer why.
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the control-plane binaries with %s (or set %s): %w", script, AssetsEnv, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("%s printed no folder", script)
	}
	return dir, nil
})

// here is this package's folder, found from this file so that it does not depend on the
// working directory of the test or command that asks.
func here() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}
