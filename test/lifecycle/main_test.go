// Package lifecycle proves docs/install.md's procedures end to end on the simulated CKE, the
// way test/e2e runs the provider (sim/stack): an upgrade from the previous release with
// nodes running, and the uninstall down to zero NodeGroups, including the recovery from a
// controller deleted first. It has its own package and cluster because an uninstall deletes
// the CRDs, which no shared cluster survives; every test brings the cluster to the release it
// starts from itself, so none depends on another's order or leftovers. `go test -short`
// skips it.
package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	simtools "github.com/CleverCloud/karpenter-provider-clever-cloud/sim/tools"
)

// previousRelease is the commit the upgrade scenario upgrades from. There is no tagged
// release yet, so until the first tag it is the last commit that passed CI; a release bumps
// it to the commit of the release it succeeds (the upgrade users will actually make).
const previousRelease = "096609d7b3c3fe1943cb40a659d8259e938c6298"

// release is one version of the provider as a user installs it: its rendered bundle and the
// controller binary its Deployment's image runs.
type release struct {
	name string
	// dir holds its rendered bundle: crds.yaml and karpenter.yaml.
	dir    string
	bundle *stack.Bundle
	binary string
}

var (
	env *stack.Env
	// previous is previousRelease, current the working tree.
	previous, current *release
	// installed is the release the cluster runs (its objects applied, its controller up), nil
	// once uninstalled.
	installed *release
	// kubectlPath is the simulated CKE's pinned kubectl, for the commands docs/install.md
	// gives verbatim.
	kubectlPath string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "lifecycle: skipped with -short")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "lifecycle: "+format+"\n", args...)
}

func run(m *testing.M) int {
	start := time.Now()
	dir, err := os.MkdirTemp("", "karpenter-lifecycle-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logf.SetLogger(logr.Discard())
	// Both controllers are built before m.Run, so outside -timeout: on a cold build cache the
	// two builds take minutes on a slow machine, which no scenario should pay for.
	buildCtx, cancelBuild := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancelBuild()
	if previous, current, err = buildReleases(buildCtx, dir); err != nil {
		fmt.Fprintln(os.Stderr, "lifecycle:", err)
		return 1
	}
	bin, err := simtools.BinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lifecycle:", err)
		return 1
	}
	kubectlPath = filepath.Join(bin, "kubectl")
	// A cluster on the previous release, the starting point of the upgrade.
	startCtx, cancelStart := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancelStart()
	env, err = stack.Start(startCtx, stack.Options{WorkDir: dir, Binary: previous.binary, BundleDir: previous.dir, Logf: progress})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lifecycle: starting the stack:", err)
		return 1
	}
	installed = previous
	progress("simulated CKE up with the %s release installed, in %s (work dir %s)", previous.name, time.Since(start).Round(100*time.Millisecond), dir)
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "lifecycle: stopping:", err)
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "lifecycle: failed; controller logs kept in", dir)
	}
	progress("package wall time %s", time.Since(start).Round(time.Second))
	return code
}

// buildReleases builds the controller of previousRelease and the working tree's.
func buildReleases(ctx context.Context, dir string) (prev, cur *release, err error) {
	step := time.Now()
	src, err := previousSource(ctx)
	if err != nil {
		return nil, nil, err
	}
	prev = &release{name: "previous (" + previousRelease[:8] + ")", dir: filepath.Join(src, "out")}
	if prev.bundle, err = stack.LoadBundle(prev.dir); err != nil {
		return nil, nil, fmt.Errorf("the previous release's committed bundle: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "previous"), 0o755); err != nil {
		return nil, nil, err
	}
	if prev.binary, err = stack.BuildController(ctx, src, filepath.Join(dir, "previous")); err != nil {
		return nil, nil, fmt.Errorf("building the previous release's controller: %w", err)
	}
	progress("previous release %s built in %s (source %s)", previousRelease[:8], time.Since(step).Round(100*time.Millisecond), src)
	step = time.Now()
	cur = &release{name: "current", dir: filepath.Join(stack.ModuleRoot(), "out")}
	if cur.bundle, err = stack.LoadBundle(cur.dir); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "current"), 0o755); err != nil {
		return nil, nil, err
	}
	if cur.binary, err = stack.ControllerBinary(ctx, filepath.Join(dir, "current")); err != nil {
		return nil, nil, err
	}
	progress("current controller ready in %s", time.Since(step).Round(100*time.Millisecond))
	return prev, cur, nil
}

// previousSource returns the tree of previousRelease, extracted from the repository's history
// the first time into .cache/lifecycle/ (ignored by git) and reused after: Go's build cache
// keys the module's packages on their directory, so a fixed one rebuilds the previous
// controller in seconds instead of compiling it afresh every run.
func previousSource(ctx context.Context) (string, error) {
	dir := filepath.Join(stack.ModuleRoot(), ".cache", "lifecycle", previousRelease)
	complete := filepath.Join(dir, ".extracted")
	if _, err := os.Stat(complete); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), previousRelease[:8]+".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := extract(ctx, previousRelease, tmp); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".extracted"), nil, 0o644); err != nil {
		return "", err
	}
	_ = os.RemoveAll(dir) // an extraction interrupted before it was marked complete
	if err := os.Rename(tmp, dir); err != nil {
		// Another run got there first.
		if _, statErr := os.Stat(complete); statErr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("moving the extracted previous release into %s: %w", dir, err)
	}
	return dir, nil
}

// extract writes the tree of commit into dst with git archive: no worktree to register and
// clean up in the repository.
func extract(ctx context.Context, commit, dst string) error {
	root := stack.ModuleRoot()
	if exec.CommandContext(ctx, "git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run() != nil {
		// A shallow clone lacks it; its origin may still have it (a local clone's always does).
		_ = exec.CommandContext(ctx, "git", "-C", root, "fetch", "--quiet", "--unshallow").Run()
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return fmt.Errorf("the previous release, commit %s, is not in the repository at %s (git cat-file: %v %s): "+
			"the upgrade scenario builds it from the history, so run it in a full clone (git fetch --unshallow)",
			commit, root, err, bytes.TrimSpace(out))
	}
	tarball := dst + ".tar"
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", "-o", tarball, commit).CombinedOutput(); err != nil {
		return fmt.Errorf("git archive %s: %w\n%s", commit, err, out)
	}
	defer os.Remove(tarball)
	if out, err := exec.CommandContext(ctx, "tar", "-x", "-f", tarball, "-C", dst).CombinedOutput(); err != nil {
		return fmt.Errorf("extracting %s: %w\n%s", tarball, err, out)
	}
	return nil
}

// install brings the cluster to rel as docs/install.md installs (on a cluster without the
// provider) or upgrades (over another release): the CRDs, then the controller's objects,
// then the controller, restarted on rel's binary with rel's Deployment environment. A cluster
// already running rel is left alone.
func install(ctx context.Context, rel *release) error {
	if installed == rel && env.Controller().Running() {
		return nil
	}
	if err := env.ApplyBundle(ctx, rel.bundle); err != nil {
		return fmt.Errorf("applying the %s release's bundle: %w", rel.name, err)
	}
	env.UseBinary(rel.binary)
	if err := env.StartController(ctx, nil); err != nil {
		return fmt.Errorf("starting the %s release's controller: %w", rel.name, err)
	}
	installed = rel
	return nil
}

// kubectl runs a command docs/install.md gives, as the cluster admin, from the repository root
// (so out/… paths resolve), and returns its stdout; it fails the test if kubectl fails.
func kubectl(t *testing.T, timeout time.Duration, args ...string) string {
	t.Helper()
	out, err := tryKubectl(t, timeout, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryKubectl runs kubectl as kubectl does, logs what it printed, and returns its stdout, or an
// error with its stderr.
func tryKubectl(t *testing.T, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlPath, append([]string{"--kubeconfig", env.Cluster.KubeconfigPath()}, args...)...)
	cmd.Dir = stack.ModuleRoot()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	err := cmd.Run()
	t.Logf("$ kubectl %s (%s)\n%s%s", strings.Join(args, " "), time.Since(started).Round(100*time.Millisecond), stdout.String(), stderr.String())
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("timed out after %s", timeout)
		}
		return stdout.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}
