package preflight_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

var (
	env     *testenv.Env
	cluster preflight.Cluster
	kube    client.Client
	cueBin  string
	root    string
)

// TestMain starts a real apiserver with CKE's NodeGroup CRD (the simulated CKE's, enum and
// all) and builds the cue command, so that written values files are rendered as a user would.
// Each test builds the cluster it needs (nodes, groups, installs) and deletes it at its end:
// the checks read the whole cluster.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	root = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	dir, err := os.MkdirTemp("", "preflight-cue-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cueBin = filepath.Join(dir, "cue")
	build := exec.Command("go", "build", "-modfile=tools/go.mod", "-o", cueBin, "cuelang.org/go/cmd/cue")
	build.Dir, build.Stderr = root, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cue:", err)
		return 1
	}
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	cat, err := catalog.Load("", "par", logr.Discard())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cluster, err = preflight.NewCluster(env.Config, cat, "karpenter", quota.Limit{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kube = cluster.Client
	return m.Run()
}

// world creates objects for one test and deletes them when it ends, so the next test reads a
// cluster without them.
type world struct {
	t   *testing.T
	g   Gomega
	ctx context.Context
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, g: NewWithT(t), ctx: context.Background()}
	return w
}

// create creates obj as the given field manager and deletes it at cleanup.
func (w *world) create(obj client.Object, manager string) {
	w.t.Helper()
	w.g.Expect(kube.Create(w.ctx, obj, client.FieldOwner(manager))).To(Succeed())
	w.t.Cleanup(func() {
		if err := kube.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
			w.t.Errorf("cleanup: deleting %T %s: %v", obj, obj.GetName(), err)
		}
	})
}

// namespace creates a namespace for the test; its objects go with it.
func (w *world) namespace(name string) {
	w.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := kube.Create(w.ctx, ns); err != nil && !strings.Contains(err.Error(), "already exists") {
		w.t.Fatal(err)
	}
}

// node creates a Ready node as CKE registers it: a worker of group (or a control-plane node
// when group is empty), with extra labels (e.g. Karpenter's), taints and its flavor's capacity.
func (w *world) node(name, group, flavor string, extra map[string]string, taints ...corev1.Taint) *corev1.Node {
	w.t.Helper()
	f, ok := cke.LookupFlavor(flavor)
	w.g.Expect(ok).To(BeTrue(), flavor)
	role := "worker"
	if group == "" {
		role = "control-plane"
	}
	n := cke.NewNode(cke.NodeSpec{Name: name, Flavor: f, Role: role, Group: group, Labels: extra, Taints: taints})
	status := n.Status
	w.create(n, "kubelet")
	status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	n.Status = status
	w.g.Expect(kube.Status().Update(w.ctx, n)).To(Succeed())
	// The apiserver taints a new node not-ready; no node lifecycle controller runs here to lift
	// it once the node reports Ready, so the test does.
	w.g.Expect(kube.Get(w.ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
	n.Spec.Taints = taints
	w.g.Expect(kube.Update(w.ctx, n)).To(Succeed())
	return n
}

// preflight gathers the cluster and evaluates every check with placement p (the bundle's
// defaults when nil).
func (w *world) preflight(p *preflight.Placement) (*preflight.Snapshot, preflight.Report) {
	w.t.Helper()
	s, err := preflight.Gather(w.ctx, cluster, preflight.FullScope)
	w.g.Expect(err).NotTo(HaveOccurred())
	if p == nil {
		d := preflight.DefaultPlacement()
		p = &d
	}
	r := preflight.Evaluate(s, p)
	var out bytes.Buffer
	w.g.Expect(r.Write(&out)).To(Succeed())
	w.t.Logf("preflight:\n%s", out.String())
	return s, r
}

// check returns the named check of a report, failing the test if it is missing.
func (w *world) check(r preflight.Report, name string) preflight.Check {
	w.t.Helper()
	c, ok := r.Get(name)
	w.g.Expect(ok).To(BeTrue(), "check %s in the report", name)
	return c
}

// values builds the values file from a snapshot, changed by edits (as values' flags change it),
// renders the bundle with it through cue as a user would, and returns the file and the rendered
// stream.
func (w *world) values(s *preflight.Snapshot, edits ...func(*preflight.Values)) (values, rendered string) {
	w.t.Helper()
	var b bytes.Buffer
	v := preflight.BuildValues(s, "the test cluster")
	for _, edit := range edits {
		edit(v)
	}
	w.g.Expect(v.Write(&b)).To(Succeed())
	file := filepath.Join(w.t.TempDir(), "values.yaml")
	w.g.Expect(os.WriteFile(file, b.Bytes(), 0o644)).To(Succeed())
	return b.String(), w.render(file)
}

// render renders the bundle with a values file through cue as a user would, the image the
// file's or the bundle's default, and returns the stream.
func (w *world) render(file string) string {
	w.t.Helper()
	b, err := os.ReadFile(file)
	w.g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(w.ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cueBin, "export", "./cue", "-l", "values:", file, "-e", "stream", "--out", "text")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CUE_REGISTRY=none")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	w.g.Expect(cmd.Run()).To(Succeed(), "cue export refused the written values:\n%s\n--- values\n%s", errOut.String(), b)
	return out.String()
}
