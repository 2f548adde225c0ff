package harness

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// AllowErrors lets the controller log errors matching any of the patterns (against the raw
// line) during this scenario.
func (s *Scenario) AllowErrors(patterns ...string) {
	for _, p := range patterns {
		s.allowed = append(s.allowed, regexp.MustCompile(p))
	}
}

// Pods lists the pods of a Deployment.
func (s *Scenario) Pods(d *appsv1.Deployment) []corev1.Pod {
	s.T.Helper()
	pods := &corev1.PodList{}
	s.must(s.Env.Client.List(s.Ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)))
	return pods.Items
}

// RunningPods counts the Deployment's pods that are Running, Ready and not terminating.
func (s *Scenario) RunningPods(d *appsv1.Deployment) (int, []corev1.Pod) {
	s.T.Helper()
	running, err := RunningPods(s.Ctx, s.Env.Client, d)
	s.must(err)
	return len(running), running
}

// WaitRunning waits until exactly n pods of d are Running and Ready, and returns them.
func (s *Scenario) WaitRunning(d *appsv1.Deployment, n int, timeout time.Duration) []corev1.Pod {
	s.T.Helper()
	var pods []corev1.Pod
	s.G.Eventually(func(g gomega.Gomega) {
		var count int
		count, pods = s.RunningPods(d)
		all := s.Pods(d)
		g.Expect(count).To(gomega.Equal(n), "running pods of %s (of %d)", d.Name, len(all))
		g.Expect(all).To(gomega.HaveLen(n), "pods of %s", d.Name)
	}).WithTimeout(timeout).WithPolling(250 * time.Millisecond).Should(gomega.Succeed())
	return pods
}

// EventsSince lists events with a reason whose last occurrence is at or after since,
// optionally about one object name.
func (s *Scenario) EventsSince(reason, object string) []corev1.Event {
	evs, err := s.Env.Events(s.Ctx, reason)
	s.must(err)
	var out []corev1.Event
	for _, ev := range evs {
		if stack.EventTime(ev).Before(s.start.Truncate(time.Second)) {
			continue
		}
		if object != "" && ev.InvolvedObject.Name != object {
			continue
		}
		out = append(out, ev)
	}
	return out
}

// Metric reads a metric of the running controller. A family not exposed yet reads 0, but a
// provider metric the provider does not register fails the test: a renamed metric must not
// pass every "is zero" assertion.
func (s *Scenario) Metric(name string, labels map[string]string) float64 {
	s.T.Helper()
	if strings.HasPrefix(name, "karpenter_clevercloud_") {
		known, err := s.Env.ProviderMetrics()
		s.must(err)
		if !known[name] {
			s.T.Fatalf("%s is no metric the provider registers (docs/reference/metrics.md)", name)
		}
	}
	v, err := s.Env.Controller().Metric(name, labels)
	s.must(err)
	return v
}

// ErrorLines are the unexpected controller error lines logged during the scenario so far.
//
// Karpenter's provisioner logs "ignoring nodepool, not ready" at error level for every pool it
// has not validated yet, whenever any pod is pending: a scenario that creates a pool while its
// other pods wait sees it for as long as validation takes, which a loaded machine stretches.
// The line is expected for the scenario's own pools, and only for them; a pool that never
// becomes Ready still fails the scenario where it waits for the pool or its nodes.
func (s *Scenario) ErrorLines() []string {
	var out []string
	for c, mark := range s.marks {
		for _, l := range c.ErrorsSince(mark) {
			if s.ownPoolNotReadyYet(l.Raw) {
				continue
			}
			if !slices.ContainsFunc(s.allowed, func(r *regexp.Regexp) bool { return r.MatchString(l.Raw) }) {
				out = append(out, l.Raw)
			}
		}
	}
	return out
}

var poolNotReady = regexp.MustCompile(`"message":"ignoring nodepool, not ready".*"NodePool":\{"name":"([^"]+)"\}`)

// ownPoolNotReadyYet says whether line is the provisioner's "not ready" line about a NodePool
// the scenario created.
func (s *Scenario) ownPoolNotReadyYet(line string) bool {
	m := poolNotReady.FindStringSubmatch(line)
	if m == nil {
		return false
	}
	return slices.ContainsFunc(s.created, func(o client.Object) bool {
		_, isPool := o.(*karpv1.NodePool)
		u, isUnstructured := o.(*unstructured.Unstructured)
		return o.GetName() == m[1] && (isPool || isUnstructured && u.GetKind() == "NodePool")
	})
}

// ExpectStaysPending asserts, for a while, that d's pods stay Pending and unbound and that
// pool has no live group of flavor: nothing more is sent for them.
func (s *Scenario) ExpectStaysPending(d *appsv1.Deployment, pool, flavor string) {
	s.T.Helper()
	s.G.Consistently(func(g gomega.Gomega) {
		for _, p := range s.Pods(d) {
			g.Expect(p.Status.Phase).To(gomega.Equal(corev1.PodPending))
			g.Expect(p.Spec.NodeName).To(gomega.BeEmpty())
		}
		g.Expect(s.PoolFlavors(pool)).NotTo(gomega.ContainElement(flavor))
	}).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(gomega.Succeed())
}
