package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/inspect"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// answerTimeout bounds the wait for the controller and Karpenter to say what they say of a
// pending pod (events, the saved quota state): a few scheduling passes.
const answerTimeout = time.Minute

// run runs the built binary with args as the cluster's admin and returns its standard output;
// a non-zero exit fails g.
func run(g Gomega, binary string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, append(args, "--kubeconfig", env.Cluster.KubeconfigPath())...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	g.Expect(cmd.Run()).To(Succeed(), "%v: %s", args, stderr.String())
	return stdout.String()
}

// podOf is the one pod of a Deployment.
func podOf(s *harness.Scenario, d *appsv1.Deployment) string {
	s.T.Helper()
	var name string
	Eventually(func(g Gomega) {
		pods := s.Pods(d)
		g.Expect(pods).To(HaveLen(1), "pods of %s", d.Name)
		name = pods[0].Name
	}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	return name
}

// Four pods, each for a reason of its own: one runs on the cheapest flavor of its pool, one
// waits on its NodePool's limits, one needs a flavor the quota rules out, one asks for a flavor
// its pool does not allow. explain says that reason for each, and status lists the pools with
// their cost and the pending pods with the word the provider or Karpenter gave on each.
func TestStatusAndExplainSayWhyEachPodWaits(t *testing.T) {
	s := harness.NewScenario(t, env)
	// Karpenter core logs each pod it cannot place, at error level.
	s.AllowErrors(`could not schedule pod`)
	binary, err := stack.ControllerBinary(s.Ctx, t.TempDir())
	Expect(err).NotTo(HaveOccurred())

	class := s.NodeClass("", nil)
	open := s.NodePool("-open", class, []string{"2XS", "XS"}, time.Hour, harness.OnDemand)
	capped := s.NodePool("-capped", class, []string{"2XS", "XS"}, time.Hour, harness.OnDemand, func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("2")}
	})
	all := s.NodePool("-all", class, nil, time.Hour, harness.OnDemand)

	fits := s.Deployment("fits", open.Name, 1, "1", "1Gi")
	s.WaitRunning(fits, 1, harness.LaunchTimeout)
	// Created once the 2XS runs, so that every verdict below is judged against the same use.
	limited := s.Deployment("limited", capped.Name, 1, "1", "1Gi")
	big := s.Deployment("big", all.Name, 1, "9", "1Gi")
	large := s.Deployment("large", open.Name, 1, "1", "1Gi", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelInstanceTypeStable: "L"}
	})
	explain := func(g Gomega, d *appsv1.Deployment, args ...string) string {
		return run(g, binary, append([]string{"explain", podOf(s, d), "-n", s.Namespace}, args...)...)
	}

	// Running: where, and what else could hold it.
	out := explain(Default, fits)
	t.Logf("explain fits:\n%s", out)
	Expect(out).To(MatchRegexp(`(?m)^Pod \S+/fits-\S+: Running on node \S+ \(NodePool ` + open.Name + `, flavor 2XS\)$`))
	Expect(out).To(ContainSubstring("Could hold it: " + open.Name + " (2XS, XS)\n"))
	Expect(out).To(ContainSubstring("Cheapest new node: 2XS in NodePool " + open.Name + ", 0.0333 EUR/h\n"))
	Expect(out).To(ContainSubstring("NodePool " + capped.Name + ": excluded: requirements: the pod's do not meet the NodePool's: key karpenter.sh/nodepool"))

	// Limit-bound: the pool's 2 vCPU hold no flavor.
	out = explain(Default, limited)
	t.Logf("explain limited:\n%s", out)
	Expect(out).To(ContainSubstring("  2XS  0.0333 EUR/h  excluded: limits: a 2XS would exceed the NodePool's limits: it adds cpu 4, 2 left\n"))
	Expect(out).To(ContainSubstring("  XS   0.0611 EUR/h  excluded: limits: a XS would exceed the NodePool's limits: it adds cpu 6, 2 left\n"))
	Expect(out).To(ContainSubstring("Could hold it: no NodePool and flavor now\n"))

	// Quota-bound: 9 vCPU need an M at least, and the quota's 8 GB left hold no M. The quota
	// state is the controller's saved one: wait for it.
	Eventually(func(g Gomega) {
		out = explain(g, big)
		g.Expect(out).To(ContainSubstring("  M    0.1167 EUR/h  excluded: quota: charges 10 vCPU / 16 GB, beyond the headroom 20 vCPU / 8 GB (limit 40 vCPU / 36 GB, in use 20 vCPU / 28 GB)\n"))
	}).WithTimeout(answerTimeout).WithPolling(time.Second).Should(Succeed())
	t.Logf("explain big:\n%s", out)
	Expect(out).To(MatchRegexp(`  S    0\.0889 EUR/h  excluded: resources: the pod requests cpu 9, memory 1\.0Gi, a S has cpu \S+, memory \S+ allocatable; quota: charges 8 vCPU / 12 GB`))
	Expect(out).To(ContainSubstring("Could hold it: no NodePool and flavor now\n"))
	Expect(out).To(ContainSubstring("Once the quota allows: M in NodePool " + all.Name + ", 0.1167 EUR/h\n"))
	var e inspect.Explanation
	Expect(json.Unmarshal([]byte(explain(Default, big, "-o", "json")), &e)).To(Succeed())
	Expect(e.Cheapest).To(BeNil())
	Expect(e.CheapestBeyondQuota).To(Equal(&inspect.Choice{Pool: all.Name, Flavor: "M", PriceHourly: 0.1167}))

	// A flavor the pool does not allow.
	out = explain(Default, large)
	t.Logf("explain large:\n%s", out)
	Expect(out).To(ContainSubstring("NodePool " + open.Name + ": excluded: requirements: the pod's do not meet the NodePool's: key node.kubernetes.io/instance-type, node.kubernetes.io/instance-type In [L] not in node.kubernetes.io/instance-type In [2XS XS]\n"))
	Expect(out).To(ContainSubstring("Could hold it: no NodePool and flavor now\n"))

	// status: the pools and their cost, the quota, and each pending pod's latest word.
	Eventually(func(g Gomega) {
		out = run(g, binary, "status")
		g.Expect(out).To(ContainSubstring("  " + open.Name + ": 1 2XS, 0.0333 EUR/h\n"))
		g.Expect(out).To(MatchRegexp(`(?m)^  ` + regexp.QuoteMeta(capped.Name) + `: no node, 0\.0000 EUR/h; limits: cpu \S+ of 2$`))
		g.Expect(out).To(MatchRegexp(`(?m)^  ` + regexp.QuoteMeta(s.Namespace) + `/big-\S+: WaitingOnQuota: Waiting on the organisation quota: NodePool ` + all.Name + ` holds this pod on a node charging 10 vCPU / 16 GB at least`))
		g.Expect(out).To(MatchRegexp(`(?m)^  ` + regexp.QuoteMeta(s.Namespace) + `/limited-\S+: FailedScheduling: Failed to schedule pod, .*exceed limits for nodepool`))
		g.Expect(out).To(MatchRegexp(`(?m)^  ` + regexp.QuoteMeta(s.Namespace) + `/large-\S+: FailedScheduling: Failed to schedule pod, .*node\.kubernetes\.io/instance-type In \[L\]`))
	}).WithTimeout(answerTimeout).WithPolling(time.Second).Should(Succeed())
	t.Logf("status:\n%s", out)
	Expect(out).To(MatchRegexp(`(?m)^Leader: \S+, renewed \d+s ago; not a pod of karpenter`))
	Expect(out).To(MatchRegexp(`(?m)^  ` + regexp.QuoteMeta(class.Name) + `\n(    .*\n)*    Ready=True Ready\n`))
	Expect(out).To(ContainSubstring("  limit: 40 vCPU / 36 GB, configured (settings.quota)\n"))
	Expect(out).To(ContainSubstring("  counted now: 20 vCPU / 28 GB in use\n"))
	Expect(out).To(MatchRegexp(`(?m)^Prices: PricesCurrent=True `))
	Expect(out).To(ContainSubstring("Preflight: not readable through the apiserver (the leader is not a pod of karpenter)"))
	Expect(out).NotTo(ContainSubstring("/fits-"), "a running pod is not pending")
}
