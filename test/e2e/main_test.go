// Package e2e is the end-to-end suite: the shipped bundle and controller binary on the
// simulated CKE (sim/stack), asserted with test/harness. Scenarios share one cluster, run one
// after the other and each leaves nothing behind. `go test -short` skips the suite.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

var env *stack.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "e2e: skipped with -short")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	start := time.Now()
	dir, err := os.MkdirTemp("", "karpenter-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	logf.SetLogger(logr.Discard())
	progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...) }
	env, err = stack.Start(ctx, stack.Options{WorkDir: dir, Logf: progress})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the stack:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: simulated CKE, bundle and controller up in %s (work dir %s)\n", time.Since(start).Round(100*time.Millisecond), dir)
	code := m.Run()
	if err := checkRBAC(env.Cluster.AuditLogPath()); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: FAIL: RBAC:", err)
		code = 1
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping:", err)
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "e2e: failed; controller logs kept in", dir)
	}
	fmt.Fprintf(os.Stderr, "e2e: suite wall time %s\n", time.Since(start).Round(time.Second))
	return code
}
