package install

import (
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// The apiserver names, on every response, the FlowSchema that classified the request. Asked
// with the controller's own identity, its leader Lease falls under the bundle's leader-election
// schema and anything else under its workload schema; the same requests from another identity
// fall under neither.
func TestTheControllerRequestsHaveTheirPriority(t *testing.T) {
	g := NewWithT(t)
	uid := func(name string) string {
		fs := &flowcontrolv1.FlowSchema{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Name: name}, fs)).To(Succeed(), "FlowSchema %s", name)
		return string(fs.UID)
	}
	leaderElection, workload := uid("karpenter-leader-election"), uid("karpenter-workload")

	controller, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig())
	g.Expect(err).NotTo(HaveOccurred())
	lease := "/apis/coordination.k8s.io/v1/namespaces/" + stack.SystemNamespace + "/leases/karpenter-leader-election"
	g.Eventually(func() error {
		return env.Client.Get(t.Context(), client.ObjectKey{Namespace: stack.SystemNamespace, Name: "karpenter-leader-election"}, &coordinationv1.Lease{})
	}).WithTimeout(time.Minute).Should(Succeed(), "the controller takes the leader Lease")
	g.Expect(classifiedBy(g, controller, lease)).To(Equal(leaderElection), "the controller's leader Lease")
	g.Expect(classifiedBy(g, controller, "/apis/karpenter.sh/v1/nodepools")).To(Equal(workload), "the controller's other requests")

	admin := rest.CopyConfig(env.Cluster.Config())
	g.Expect(classifiedBy(g, admin, lease)).NotTo(BeElementOf(leaderElection, workload), "another identity's request")
}

// classifiedBy is the UID of the FlowSchema the apiserver classified a GET of path under. A
// 429 is the apiserver shedding load (priority and fairness queues full on a loaded machine),
// not an answer about the classification: the request is asked again, as client-go would.
func classifiedBy(g Gomega, cfg *rest.Config, path string) string {
	rt, err := rest.TransportFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	var uid string
	g.Eventually(func(g Gomega) {
		req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := rt.RoundTrip(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		g.Expect(resp.StatusCode).NotTo(Equal(http.StatusTooManyRequests), "GET %s: the apiserver sheds load", path)
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "GET %s", path)
		uid = resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
	}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
	return uid
}
