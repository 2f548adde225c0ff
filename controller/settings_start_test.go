package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The built binary, handed settings it refuses, does not stop on them: each runs on its
// default, reported, and the controller goes on to start (here it then fails for want of a
// cluster, which is what it would need next). Karpenter core reads LOG_LEVEL itself and exits
// on a level it does not know: the default written back keeps it from doing so. A refused
// region, which no default can stand in for, still stops it with exit code 2.
func TestTheBinaryRunsARefusedSettingOnItsDefault(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "karpenter-clevercloud")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(env ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = append(os.Environ(), append([]string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "none"), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="}, env...)...)
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("still running after 2 minutes without a cluster\n%s", errOut.String())
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), errOut.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, errOut.String()
	}

	code, stderr := run("LOG_LEVEL=trace", "NODEGROUP_LAUNCH_GIVE_UP_AFTER=20m", "NODEGROUP_ACCEPTANCE_TIMEOUT=0s")
	for _, want := range []string{
		`LOG_LEVEL="trace": must be one of debug, info, error; running on its default "info" (settings.logLevel)`,
		`NODEGROUP_LAUNCH_GIVE_UP_AFTER="20m": must be below 15m; running on its default`,
		`NODEGROUP_ACCEPTANCE_TIMEOUT="0s": must be positive; running on its default "10s" (settings.acceptanceTimeout)`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the log does not say %q:\n%s", want, stderr)
		}
	}
	if code == 2 || strings.Contains(stderr, "invalid settings") || strings.Contains(stderr, "invalid LOG_LEVEL") {
		t.Errorf("exit %d: the controller stopped on a setting that has a safe default\n%s", code, stderr)
	}

	code, stderr = run("CLEVER_CLOUD_REGION=PAR", "LOG_LEVEL=trace")
	if code != 2 || !strings.Contains(stderr, `invalid settings`) || !strings.Contains(stderr, `CLEVER_CLOUD_REGION="PAR": must match`) {
		t.Errorf("a refused region: exit %d, want 2 naming CLEVER_CLOUD_REGION\n%s", code, stderr)
	}
}
