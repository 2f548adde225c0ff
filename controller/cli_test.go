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

// The built binary answers help, and refuses a command line, without starting the controller.
// The proof: in an environment where the controller cannot run (no cluster) and complains about
// its settings first (an invalid LOG_LEVEL), help exits 0 with nothing on standard error, and a
// refused command line exits 2 naming the word, never the setting.
func TestTheBinaryExplainsItselfWithoutStarting(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "karpenter-clevercloud")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := append(os.Environ(), "LOG_LEVEL=bogus", "KUBECONFIG="+filepath.Join(t.TempDir(), "none"), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
	run := func(args ...string) (code int, stdout, stderr string) {
		t.Helper()
		// A controller that started would not exit on its own: the deadline turns that into a
		// failure instead of a hung test.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("%q still ran after 2 minutes: the controller started\n%s", args, errOut.String())
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), out.String(), errOut.String()
		}
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return 0, out.String(), errOut.String()
	}

	// What starting looks like here: the settings complained about, then a failure.
	code, _, stderr := run()
	if code == 0 || !strings.Contains(stderr, "LOG_LEVEL") {
		t.Fatalf("the controller with LOG_LEVEL=bogus and no cluster: exit %d, %q; want a failure naming LOG_LEVEL", code, stderr)
	}
	usage := []string{"preflight [flags]", "values [flags]", "version", "completion bash|zsh", "LOG_LEVEL", "NODEGROUP_LAUNCH_GIVE_UP_AFTER"}
	controller := []string{"--metrics-port int", "--feature-gates string", "LOG_LEVEL", "NODEGROUP_LAUNCH_GIVE_UP_AFTER"}
	for _, tc := range []struct {
		args []string
		says []string
	}{
		{[]string{"--help"}, usage}, {[]string{"-h"}, usage}, {[]string{"help"}, usage},
		{[]string{"help", "controller"}, controller}, {[]string{"controller", "--help"}, controller}, {[]string{"--metrics-port", "9000", "--help"}, controller},
	} {
		code, stdout, stderr := run(tc.args...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage") {
			t.Errorf("%q: exit %d, stderr %q, stdout %.200q; want the usage and exit 0", tc.args, code, stderr, stdout)
		}
		for _, s := range tc.says {
			if !strings.Contains(stdout, s) {
				t.Errorf("%q: the help does not say %s", tc.args, s)
			}
		}
	}
	for _, tc := range []struct{ args []string }{{[]string{"prefligt"}}, {[]string{"--no-such-flag"}}, {[]string{"--metrics-port", "9000", "extra"}}} {
		code, stdout, stderr := run(tc.args...)
		if code != 2 || stdout != "" || strings.Contains(stderr, "LOG_LEVEL") || !strings.Contains(stderr, strings.TrimPrefix(tc.args[len(tc.args)-1], "--")) {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %s, before the settings are read", tc.args, code, stderr, tc.args[len(tc.args)-1])
		}
	}
}
