package topology

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// placementDeployment creates, in the scenario's namespace, a Deployment whose pod template is
// the shipped bundle's (out/karpenter.yaml): the real scheduler then places it with the
// bundle's nodeSelector, affinity, tolerations, spread, priority and requests on the simulated
// nodes, as it would place the controller. Only the ServiceAccount changes (the bundle's lives
// in its own namespace; it plays no part in placement).
func placementDeployment(s *harness.Scenario) *appsv1.Deployment {
	s.T.Helper()
	b := env.Bundle.Deployment
	tmpl := b.Spec.Template.DeepCopy()
	tmpl.Spec.ServiceAccountName = "default"
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "controller-placement", Namespace: s.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(*b.Spec.Replicas),
			Selector: b.Spec.Selector.DeepCopy(),
			Template: *tmpl,
		},
	}
	s.Create(d)
	return d
}

// expectOnWorkers checks that every pod runs on a node of the pre-existing group, never on a
// node Karpenter manages.
func expectOnWorkers(s *harness.Scenario, pods []corev1.Pod) {
	s.T.Helper()
	for _, p := range pods {
		n := &corev1.Node{}
		Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: p.Spec.NodeName}, n)).To(Succeed())
		Expect(n.Labels).NotTo(HaveKey(karpv1.NodePoolLabelKey), "controller pod %s on Karpenter's node %s", p.Name, n.Name)
		Expect(n.Labels).To(HaveKeyWithValue(ngv1.LabelNodeGroup, workerPool), "controller pod %s on %s", p.Name, n.Name)
	}
}

// On a worker-only CKE the bundle's controller Deployment is scheduled on the pre-existing
// workers (the old control-plane selector left both replicas Pending here), the preflight
// agrees, the running controller's checks report, Karpenter autoscales a workload beside it,
// and a controller pod rescheduled once Karpenter's nodes exist still avoids them.
func TestWorkerOnlyPlacementAndAutoscaling(t *testing.T) {
	s := harness.NewScenario(t, env)

	// The preflight, read as the admin: placement on the two workers, nothing failing.
	cat, err := catalog.Load("", "par", logr.Discard())
	Expect(err).NotTo(HaveOccurred())
	cluster, err := preflight.NewCluster(env.Cluster.Config(), cat, stack.SystemNamespace, quota.Limit{})
	Expect(err).NotTo(HaveOccurred())
	snap, err := preflight.Gather(s.Ctx, cluster, preflight.FullScope)
	Expect(err).NotTo(HaveOccurred())
	Expect(snap.HasControlPlaneNodes()).To(BeFalse())
	report := preflight.Evaluate(snap, ptr.To(preflight.PlacementOf(env.Bundle.Deployment, "out/karpenter.yaml")))
	place, _ := report.Get(preflight.CheckPlacement)
	Expect(place.Result).To(Equal(preflight.Pass), place.Found)
	Expect(report.ExitCode()).NotTo(Equal(preflight.ExitFail), "%+v", report)
	workers := snap.Place(preflight.PlacementOf(env.Bundle.Deployment, "out/karpenter.yaml")).Eligible
	Expect(workers).To(HaveLen(workerNodes))

	// The running controller repeats its run-time checks on the gauge.
	Eventually(func(g Gomega) {
		v, err := env.Controller().Metric("karpenter_clevercloud_preflight_check", map[string]string{"check": preflight.CheckNodeGroupAPI, "result": "pass"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v).To(Equal(1.0))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	placed := placementDeployment(s)
	pods := s.WaitRunning(placed, int(*placed.Spec.Replicas), time.Minute)
	expectOnWorkers(s, pods)
	for _, p := range pods {
		Expect(workers).To(ContainElement(p.Spec.NodeName), "the scheduler and the preflight agree")
	}

	// Karpenter autoscales beside it.
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS", "XS"}, time.Hour, harness.OnDemand)
	inflate := s.Deployment("inflate", pool.Name, 3, "1", "1Gi")
	for _, p := range s.WaitRunning(inflate, 3, harness.LaunchTimeout) {
		n := &corev1.Node{}
		Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: p.Spec.NodeName}, n)).To(Succeed())
		Expect(n.Labels).To(HaveKeyWithValue(karpv1.NodePoolLabelKey, pool.Name))
	}

	// Rescheduled now that Karpenter's (emptier) nodes exist, the controller still avoids them.
	Expect(env.Client.DeleteAllOf(s.Ctx, &corev1.Pod{}, client.InNamespace(s.Namespace), client.MatchingLabels(placed.Spec.Selector.MatchLabels), client.GracePeriodSeconds(0))).To(Succeed())
	Eventually(func(g Gomega) {
		for _, p := range s.Pods(placed) {
			g.Expect(p.DeletionTimestamp).To(BeNil(), "old pod %s still terminating", p.Name)
		}
	}).WithTimeout(time.Minute).Should(Succeed())
	expectOnWorkers(s, s.WaitRunning(placed, int(*placed.Spec.Replicas), time.Minute))

	// The pre-existing group is the platform's and the user's: untouched.
	g := &ngv1.NodeGroup{}
	Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: workerPool}, g)).To(Succeed())
	Expect(g.Spec.NodeCount).To(Equal(int32(workerNodes)))
	Expect(g.DeletionTimestamp).To(BeNil())
}
