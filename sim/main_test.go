package sim_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/operator"
	simtools "github.com/CleverCloud/karpenter-provider-clever-cloud/sim/tools"
)

// One simulated CKE serves every test of the package: starting one costs ~10s of a small
// machine. The organisation quota is shared too, so tests run one after the other and leave
// no NodeGroup behind.
var (
	cluster  *sim.Cluster
	k8s      client.WithWatch
	defaults operator.Options
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Like every package that starts a cluster: -short is the quick unit pass.
		fmt.Fprintln(os.Stderr, "sim: skipped with -short")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Built here when KUBEBUILDER_ASSETS is unset, outside the start deadline: a cold build
	// takes minutes on a small machine, which is no failure of the simulator.
	bin, err := simtools.BinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "finding the simulated CKE's binaries:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	opts := sim.FastOptions()
	opts.Audit = true
	opts.BinDir = bin
	// TestNotReadyReportHolds waits for a status post to land after its report.
	opts.NodeStatusReport = 25 * time.Second
	cluster, err = sim.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting simulated CKE:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "simulated CKE started in %s\n", time.Since(start).Round(10*time.Millisecond))
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping simulated CKE:", err)
		}
	}()
	k8s, err = client.NewWithWatch(cluster.Config(), client.Options{Scheme: sim.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating a watching client:", err)
		return 1
	}
	defaults = cluster.Operator().Options()
	return m.Run()
}

// eventually polls check until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	gomega.NewWithT(t).Eventually(check).WithTimeout(timeout).WithPolling(50 * time.Millisecond).Should(gomega.Succeed())
}

// consistently fails if check returns an error at any poll during d.
func consistently(t *testing.T, d time.Duration, check func() error) {
	t.Helper()
	gomega.NewWithT(t).Consistently(check).WithTimeout(d).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
}

// configure changes the operator's options for one test.
func configure(t *testing.T, mutate func(*operator.Options)) {
	t.Helper()
	cluster.Operator().Configure(mutate)
	t.Cleanup(func() {
		cluster.Operator().Configure(func(o *operator.Options) { *o = defaults })
		cluster.Operator().ResetQuotaEngine()
	})
}

func newGroup(name, flavor string, nodes int32) *ngv1.NodeGroup {
	g := &ngv1.NodeGroup{Spec: ngv1.NodeGroupSpec{Flavor: flavor, NodeCount: nodes}}
	g.Name = name
	return g
}

// create creates a group and deletes it (waiting until it is gone) when the test ends.
func create(t *testing.T, g *ngv1.NodeGroup) *ngv1.NodeGroup {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, g); err != nil {
		t.Fatalf("creating NodeGroup %q: %v", g.Name, err)
	}
	t.Cleanup(func() { deleteAndWait(t, g.Name) })
	return g
}

func deleteAndWait(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	g := &ngv1.NodeGroup{}
	g.Name = name
	if err := k8s.Delete(ctx, g); client.IgnoreNotFound(err) != nil {
		t.Fatalf("deleting NodeGroup %q: %v", name, err)
	}
	eventually(t, 30*time.Second, func() error {
		err := k8s.Get(ctx, client.ObjectKey{Name: name}, &ngv1.NodeGroup{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("NodeGroup %q still there (%v)", name, err)
	})
}

func get(t *testing.T, name string) *ngv1.NodeGroup {
	t.Helper()
	g := &ngv1.NodeGroup{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, g); err != nil {
		t.Fatalf("reading NodeGroup %q: %v", name, err)
	}
	return g
}

// waitPhase waits for a group's phase and returns the group.
func waitPhase(t *testing.T, name, phase string) *ngv1.NodeGroup {
	t.Helper()
	var g *ngv1.NodeGroup
	eventually(t, 20*time.Second, func() error {
		g = get(t, name)
		if g.Status.Phase != phase {
			return fmt.Errorf("NodeGroup %q phase %q, want %q (conditions %+v)", name, g.Status.Phase, phase, g.Status.Conditions)
		}
		return nil
	})
	return g
}

func getNode(name string) (*corev1.Node, error) {
	n := &corev1.Node{}
	err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, n)
	return n, err
}

func waitNodeReady(t *testing.T, name string) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	eventually(t, 30*time.Second, func() error {
		var err error
		if n, err = getNode(name); err != nil {
			return err
		}
		if !sim.NodeReady(n) {
			return fmt.Errorf("node %q not Ready", name)
		}
		return nil
	})
	return n
}

func waitNodeGone(t *testing.T, name string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		if _, err := getNode(name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %q still there (%v)", name, err)
		}
		return nil
	})
}

func condition(g *ngv1.NodeGroup, t string) metav1.Condition {
	if c := g.Condition(t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// update applies mutate to the latest version of a group, retrying on conflicts with the
// operator's own writes.
func update(t *testing.T, name string, mutate func(*ngv1.NodeGroup)) error {
	t.Helper()
	for {
		cur := get(t, name)
		mutate(cur)
		err := k8s.Update(context.Background(), cur)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

func nodeReadyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func nodeReadyTrue(n *corev1.Node) bool {
	c := nodeReadyCondition(n)
	return c != nil && c.Status == corev1.ConditionTrue
}

func withLabels(g *ngv1.NodeGroup, l map[string]string) *ngv1.NodeGroup {
	g.Spec.Labels = l
	return g
}

func withTaints(g *ngv1.NodeGroup, ts ...ngv1.Taint) *ngv1.NodeGroup {
	g.Spec.Taints = ts
	return g
}

func withFault(g *ngv1.NodeGroup, f operator.Fault) *ngv1.NodeGroup {
	g.Annotations = map[string]string{operator.FaultAnnotation: string(f)}
	return g
}

// leaseRenewal is when the node's kubelet last renewed its Lease. The Lease must be this Node
// object's: one left by an earlier node of the same name (a test run again) is garbage
// collected, and the kubelet then makes a new one.
func leaseRenewal(ctx context.Context, name string) (time.Time, error) {
	n, err := getNode(name)
	if err != nil {
		return time.Time{}, fmt.Errorf("getting node %s: %w", name, err)
	}
	l := &coordinationv1.Lease{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: name}, l); err != nil {
		return time.Time{}, fmt.Errorf("getting the Lease of node %s: %w", name, err)
	}
	if !slices.ContainsFunc(l.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == n.UID }) {
		return time.Time{}, fmt.Errorf("Lease of node %s is owned by %v, not by the node (%s)", name, l.OwnerReferences, n.UID)
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}, fmt.Errorf("Lease of node %s never renewed", name)
	}
	return l.Spec.RenewTime.Time, nil
}

func readyIs(ctx context.Context, name string, want corev1.ConditionStatus) error {
	n := &corev1.Node{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return err
	}
	if got := sim.NodeReady(n); got != (want == corev1.ConditionTrue) {
		return fmt.Errorf("node %s: Ready %v, want %s", name, got, want)
	}
	return nil
}
