package harness

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/controlplane"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// LaunchTimeout is the budget for one node on the suites' simulated CKE: batching (≤ 10 s),
// acceptance 1 s, boot 3 s, registration.
const LaunchTimeout = 90 * time.Second

// DisruptionTimeout is the budget for one disruption: consolidateAfter, Karpenter's ~15 s
// validation of its decision, the drain and the NodeGroup's teardown.
const DisruptionTimeout = 2 * time.Minute

// GarbageCollectionTimeout is the budget for a garbage-collection verdict: passes run on
// NodeGroup and NodeClaim events and at least every minute, and reaping spares groups
// younger than 30 s.
const GarbageCollectionTimeout = 3 * time.Minute

// RunSuite is the TestMain of an end-to-end package: it starts a simulated CKE with the
// bundle applied and the controller running (sim/stack), hands it to started, runs the
// package's scenarios one after the other, proves the bundle's RBAC over everything they made
// the controller do, and stops it all. name prefixes its progress lines. Each package gets a
// cluster of its own, so scenarios that change shared state (the quota, the controller) can
// live apart from the others. `go test -short` skips the package.
func RunSuite(m *testing.M, name string, started func(*stack.Env), opts ...SuiteOption) int {
	flag.Parse()
	if testing.Short() {
		fmt.Fprintf(os.Stderr, "%s: skipped with -short\n", name)
		return 0
	}
	start := time.Now()
	progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, name+": "+format+"\n", args...) }
	dir, err := os.MkdirTemp("", "karpenter-"+strings.NewReplacer("/", "-").Replace(name)+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	logf.SetLogger(logr.Discard())
	so := stack.Options{WorkDir: dir, Logf: progress}
	for _, o := range opts {
		o(&so)
	}
	env, err := stack.Start(ctx, so)
	if err != nil {
		progress("starting the stack: %v", err)
		return 1
	}
	progress("simulated CKE, bundle and controller up in %s (work dir %s)", time.Since(start).Round(100*time.Millisecond), dir)
	started(env)
	code := m.Run()
	if err := CheckRBAC(env.Cluster.AuditLogPath(), name, env.Cluster.APIServerStartups()...); err != nil {
		progress("FAIL: RBAC: %v", err)
		code = 1
	}
	if err := env.Stop(); err != nil {
		progress("stopping: %v", err)
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		progress("failed; controller logs kept in %s", dir)
	}
	progress("suite wall time %s", time.Since(start).Round(time.Second))
	return code
}

// CheckRBAC proves, from the apiserver's audit log, that every request the controller made
// as the bundle's ServiceAccount over the whole run was allowed. RunSuite runs it after every
// scenario, whatever their order or selection, so it sees everything the run exercised. name
// prefixes the summary line.
//
// A restarted apiserver serves requests before its RBAC informers have synced, and denies them
// meanwhile: a request it received during one of startups, before it was ready, is no proof of
// a gap in the bundle's RBAC (the controller repeats its requests, and a real gap is denied
// again afterwards). Those are counted apart.
func CheckRBAC(auditLog, name string, startups ...controlplane.Startup) error {
	events, err := (&AuditReader{Path: auditLog}).Read()
	if err != nil {
		return fmt.Errorf("reading the audit log %s: %w", auditLog, err)
	}
	var forbidden []string
	starting := 0
	seen := map[string]bool{}
	for _, ev := range events {
		if ev.User.Username != stack.ServiceAccountUser || seen[ev.AuditID] || ev.ResponseStatus.Code == 0 {
			continue
		}
		seen[ev.AuditID] = true
		if ev.ResponseStatus.Code != 403 {
			continue
		}
		if slices.ContainsFunc(startups, func(st controlplane.Startup) bool {
			return !ev.RequestReceived.Before(st.Started) && ev.RequestReceived.Before(st.Ready)
		}) {
			starting++
			continue
		}
		forbidden = append(forbidden, ev.Verb+" "+ev.RequestURI)
	}
	if starting > 0 {
		fmt.Printf("%s: RBAC: %d request(s) denied by a restarted apiserver before it was ready, not counted\n", name, starting)
	}
	counts := CountRequests(events, stack.ServiceAccountUser)
	pairs := make([]string, 0, len(counts))
	for _, c := range counts {
		pairs = append(pairs, fmt.Sprintf("%s %s ×%d", c.Verb, c.Resource, c.Count))
	}
	fmt.Printf("%s: RBAC: %d requests by %s, %d distinct verb/resource pairs: %s\n", name, len(seen), stack.ServiceAccountUser, len(pairs), strings.Join(pairs, ", "))
	switch {
	case len(seen) == 0:
		return fmt.Errorf("no request by %s in the audit log %s: the controller's requests were not audited", stack.ServiceAccountUser, auditLog)
	case len(forbidden) > 0:
		return fmt.Errorf("the bundle's RBAC forbade %d request(s) of %s: %s", len(forbidden), stack.ServiceAccountUser, strings.Join(forbidden, "; "))
	}
	return nil
}
