package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RepairToleration is the repair toleration linked into the controller the NodeRepair
// scenarios run, in place of the product's 10 minutes.
const RepairToleration = 30 * time.Second

// repairTolerationSymbol is the controller's link-time variable (controller/cloudprovider).
const repairTolerationSymbol = "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider.repairTolerationOverride"

// One test binary has one Env, so the repair controller is built at most once per run.
var repairBuild struct {
	once sync.Once
	path string
	err  error
}

// RepairBinary returns the controller built with RepairToleration linked in, building it on
// first use. The build has no deadline of its own: on a busy machine it may take minutes,
// which is no failure of the scenario that asked for it.
func (e *Env) RepairBinary() (string, error) {
	repairBuild.once.Do(func() {
		start := time.Now()
		repairBuild.path, repairBuild.err = BuildRepairController(context.Background(), filepath.Join(e.dir, "repair"))
		if repairBuild.err == nil {
			e.logf("repair controller (toleration %s) built in %s", RepairToleration, time.Since(start).Round(100*time.Millisecond))
		}
	})
	return repairBuild.path, repairBuild.err
}

// BuildRepairController builds the working tree's controller into dir with RepairToleration
// linked in place of the product's 10 minutes, and checks that the link took.
func BuildRepairController(ctx context.Context, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	ldflag := fmt.Sprintf("-X %s=%s", repairTolerationSymbol, RepairToleration)
	path, err := BuildController(ctx, ModuleRoot(), dir, ldflag)
	if err != nil {
		return "", fmt.Errorf("building the repair controller: %w", err)
	}
	// The linker ignores -X for a symbol that does not exist: a renamed variable would leave
	// the product's 10 minutes in and every repair scenario timing out for no visible reason.
	out, err := exec.CommandContext(ctx, "go", "tool", "nm", path).Output()
	if err != nil {
		return "", fmt.Errorf("listing the symbols of %s: %w", path, err)
	}
	if !strings.Contains(string(out), " "+repairTolerationSymbol+"\n") {
		return "", fmt.Errorf("%s has no symbol %s: the -X flag linked nothing", path, repairTolerationSymbol)
	}
	return path, nil
}

// StartControllerFrom is StartController with another binary; the next StartController or
// RestartController runs the suite's own binary again.
func (e *Env) StartControllerFrom(ctx context.Context, binary string, overrides map[string]string) error {
	suite := e.binary
	e.binary = binary
	defer func() { e.binary = suite }()
	return e.StartController(ctx, overrides)
}

// FeatureGates is the bundle's FEATURE_GATES with the given gates set, the others kept.
func (e *Env) FeatureGates(set map[string]bool) (string, error) {
	env, err := e.Bundle.DeploymentEnv()
	if err != nil {
		return "", err
	}
	var gates []string
	seen := map[string]bool{}
	for _, g := range strings.Split(env["FEATURE_GATES"], ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		name, _, _ := strings.Cut(g, "=")
		if on, ok := set[name]; ok {
			g = fmt.Sprintf("%s=%t", name, on)
			seen[name] = true
		}
		gates = append(gates, g)
	}
	for name, on := range set {
		if !seen[name] {
			gates = append(gates, fmt.Sprintf("%s=%t", name, on))
		}
	}
	return strings.Join(gates, ","), nil
}

// ReportNotReady makes a node's kubelet report it NotReady, reason KubeletNotReady (a broken
// container runtime, PLEG unhealthy), from now on: the simulated CKE's fake kubelet keeps that
// report through its heartbeats. It returns the condition's transition time as stored, from
// which core measures the repair toleration.
//
// The simulator cannot stop a running node's heartbeat, so the controller-manager's
// Ready=Unknown is out of reach: kwok (v0.8.0) keeps driving a node whose kwok annotation is
// removed, its informer dropping the update rather than reporting the node unmanaged (such a
// node was still Ready three minutes later).
func (e *Env) ReportNotReady(ctx context.Context, node string) (time.Time, error) {
	var since time.Time
	err := e.setReady(ctx, node, func(c *corev1.NodeCondition) {
		*c = corev1.NodeCondition{
			Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
			Message:           "container runtime is down",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}
	})
	if err != nil {
		return since, err
	}
	n := &corev1.Node{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return since, fmt.Errorf("reading node %s: %w", node, err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionFalse {
			return c.LastTransitionTime.Time, nil
		}
	}
	return since, fmt.Errorf("node %s is not NotReady right after the report: %+v", node, n.Status.Conditions)
}

// ReportReady makes a node's kubelet report it Ready again, as a recovered one does.
func (e *Env) ReportReady(ctx context.Context, node string) error {
	return e.setReady(ctx, node, func(c *corev1.NodeCondition) {
		*c = corev1.NodeCondition{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message:           "kubelet is posting ready status",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}
	})
}

// setReady rewrites a node's Ready condition, retrying on conflicts with the fake kubelet's
// own status writes.
func (e *Env) setReady(ctx context.Context, name string, set func(*corev1.NodeCondition)) error {
	return Poll(ctx, 30*time.Second, func() error {
		n := &corev1.Node{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return fmt.Errorf("reading node %s: %w", name, err)
		}
		before := n.DeepCopy()
		found := false
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				set(&n.Status.Conditions[i])
				found = true
			}
		}
		if !found {
			return fmt.Errorf("node %s has no Ready condition yet", name)
		}
		if err := e.Client.Status().Patch(ctx, n, client.StrategicMergeFrom(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("writing the Ready condition of node %s: %w", name, err)
		}
		return nil
	})
}
