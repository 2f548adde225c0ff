// Package harness is what the e2e suites and the benchmarks assert with, on the environment
// sim/stack starts: a Scenario per test (its own namespace, NodePools and classes, a mark in
// the controller's log), its expectations, and a cleanup that deletes what the scenario
// created and asserts that no NodeClaim, managed NodeGroup or worker Node is left and that the
// controller logged no error the scenario did not expect; and the apiserver audit log's
// reader, for the RBAC proof and the request counts.
package harness

import (
	"context"
	"fmt"
	"hash/crc32"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/controlplane"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// Scenario is one test's slice of the shared Env: its own namespace, NodePools and classes,
// a log mark, and a cleanup that proves nothing was left behind.
type Scenario struct {
	T   *testing.T
	Env *stack.Env
	G   gomega.Gomega
	Ctx context.Context
	// Namespace holds the scenario's workloads; deleted at cleanup.
	Namespace string
	// Name is a DNS-label-safe short name, used for the scenario's objects.
	Name string

	start       time.Time
	marks       map[*stack.Controller]int
	allowed     []*regexp.Regexp
	created     []client.Object
	nodesBefore map[string]bool
	groupBefore map[string]bool
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// NewScenario starts a scenario for t on e. Call it first in every test.
func NewScenario(t *testing.T, e *stack.Env) *Scenario {
	t.Helper()
	name := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(strings.TrimPrefix(t.Name(), "Test")), "-"), "-")
	if len(name) > 40 {
		// Two long test names may share their first 40 characters: the hash of the whole name
		// keeps their namespaces apart.
		name = fmt.Sprintf("%s-%08x", strings.TrimRight(name[:31], "-"), crc32.ChecksumIEEE([]byte(t.Name())))
	}
	s := &Scenario{
		T: t, Env: e, G: gomega.NewWithT(t), Ctx: context.Background(),
		Namespace: "e2e-" + name, Name: name, start: time.Now(),
		marks: map[*stack.Controller]int{e.Controller(): e.Controller().LineCount()},
	}
	s.nodesBefore, s.groupBefore = map[string]bool{}, map[string]bool{}
	nodes := &corev1.NodeList{}
	s.must(e.Client.List(s.Ctx, nodes))
	for _, n := range nodes.Items {
		s.nodesBefore[n.Name] = true
	}
	groups := &ngv1.NodeGroupList{}
	s.must(e.Client.List(s.Ctx, groups))
	for _, g := range groups.Items {
		s.groupBefore[g.Name] = true
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}
	s.must(e.Client.Create(s.Ctx, ns))
	// Pods are admitted only once the namespace's default ServiceAccount exists.
	s.G.Eventually(func() error {
		return e.Client.Get(s.Ctx, client.ObjectKey{Namespace: s.Namespace, Name: "default"}, &corev1.ServiceAccount{})
	}).WithTimeout(serviceAccountTimeout(e.Cluster.APIServerStartups(), time.Now())).Should(gomega.Succeed())
	t.Cleanup(s.cleanup)
	// Scenarios run one at a time: the package-level Expect/Eventually report to this test.
	gomega.RegisterTestingT(t)
	return s
}

// serviceAccountTimeout is how long a new namespace may wait for its default ServiceAccount.
// The kube-controller-manager creates it once its informers have seen the namespace; after
// the apiserver restarts, its controllers refuse to act on caches older than their own last
// write until their watches catch up, which can outlast the usual wait (the audit log shows
// the ServiceAccount created only when the informers caught up, not when the namespace was). A
// scenario that starts within a few minutes of a restart waits that out: the ServiceAccount is
// a precondition of the scenario, the controller-manager's, not something the provider does.
func serviceAccountTimeout(startups []controlplane.Startup, now time.Time) time.Duration {
	if n := len(startups); n > 0 && now.Sub(startups[n-1].Ready) < 5*time.Minute {
		return 3 * time.Minute
	}
	return 30 * time.Second
}

func (s *Scenario) must(err error) {
	s.T.Helper()
	if err != nil {
		s.T.Fatal(err)
	}
}

// Track registers an object the scenario created for deletion at cleanup (reverse order).
func (s *Scenario) Track(obj client.Object) { s.created = append(s.created, obj) }

// Create creates obj and tracks it.
func (s *Scenario) Create(obj client.Object) {
	s.T.Helper()
	s.must(s.Env.Client.Create(s.Ctx, obj))
	s.Track(obj)
}

// NodeClass creates a CleverNodeClass named after the scenario (plus suffix) and waits for it
// to be Ready.
func (s *Scenario) NodeClass(suffix string, labels map[string]string) *v1alpha1.CleverNodeClass {
	s.T.Helper()
	nc := NewNodeClass(s.Name+suffix, labels)
	s.Create(nc)
	WaitNodeClassReady(s.Ctx, s.G, s.Env.Client, nc)
	return nc
}

// PoolOption edits a NodePool before creation.
type PoolOption func(*karpv1.NodePool)

// NodePool creates a NodePool named after the scenario (plus suffix) on class, allowing the
// given flavors (all when empty), consolidating empty or underutilized nodes after
// consolidateAfter.
func (s *Scenario) NodePool(suffix string, class *v1alpha1.CleverNodeClass, flavors []string, consolidateAfter time.Duration, opts ...PoolOption) *karpv1.NodePool {
	s.T.Helper()
	np := NewNodePool(s.Name+suffix, class.Name, flavors, consolidateAfter, opts...)
	s.Create(np)
	s.WaitPoolsReady(np.Name)
	return np
}

// WorkloadOption edits a Deployment before creation.
type WorkloadOption func(*appsv1.Deployment)

// Deployment creates, in the scenario's namespace, a Deployment of pause pods requesting cpu
// and memory, held to the NodePool pool by node affinity.
func (s *Scenario) Deployment(name, pool string, replicas int32, cpu, memory string, opts ...WorkloadOption) *appsv1.Deployment {
	s.T.Helper()
	d := NewDeployment(s.Namespace, name, pool, replicas, cpu, memory, opts...)
	s.must(s.Env.Client.Create(s.Ctx, d))
	return d
}

// OnDemand pins the NodePool to on-demand capacity, the only kind CKE sells. Without it,
// Karpenter's replace consolidation asks for spot (see docs/e2e.md, known issues).
func OnDemand(np *karpv1.NodePool) {
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
		Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand},
	})
}

// AwayFrom keeps the Deployment's pods off nodes running pods with labels (required
// anti-affinity on hostname).
func AwayFrom(labels map[string]string) WorkloadOption {
	return func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey:   corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
			}},
		}
	}
}

// OnePerNode spreads the Deployment's pods one per node: away from each other.
func OnePerNode(d *appsv1.Deployment) { AwayFrom(d.Spec.Selector.MatchLabels)(d) }

// Update reads the live obj (by obj's name and namespace), applies change to it and writes it
// back, retrying on conflicts with the controllers that write the same object.
func Update[T client.Object](s *Scenario, obj T, change func(T)) {
	s.T.Helper()
	s.G.Eventually(func() error {
		if err := s.Env.Client.Get(s.Ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return s.Env.Client.Update(s.Ctx, obj)
	}).WithTimeout(10 * time.Second).Should(gomega.Succeed())
}

// Scale sets a Deployment's replicas.
func (s *Scenario) Scale(d *appsv1.Deployment, replicas int32) {
	s.T.Helper()
	Update(s, d.DeepCopy(), func(cur *appsv1.Deployment) { cur.Spec.Replicas = ptr.To(replicas) })
}

// RestartController restarts the controller (gracefully) with overrides; its log is checked
// at cleanup like the first one's.
func (s *Scenario) RestartController(overrides map[string]string) {
	s.T.Helper()
	s.must(s.Env.RestartController(s.Ctx, overrides))
	s.marks[s.Env.Controller()] = 0
}

// RestartRepairController restarts the controller from RepairBinary with overrides, and puts
// the suite's controller (no overrides) back when the test ends, before the scenario's cleanup.
func (s *Scenario) RestartRepairController(overrides map[string]string) {
	s.T.Helper()
	binary, err := s.Env.RepairBinary()
	s.must(err)
	s.T.Cleanup(func() { s.RestartController(nil) })
	s.must(s.Env.StartControllerFrom(s.Ctx, binary, overrides))
	s.marks[s.Env.Controller()] = 0
}
