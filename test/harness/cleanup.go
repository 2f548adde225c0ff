package harness

import (
	"fmt"
	"strings"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// CleanupTimeout bounds how long a scenario's cleanup waits for its nodes to go.
const CleanupTimeout = 3 * time.Minute

func (s *Scenario) cleanup() {
	t := s.T
	failedBefore := t.Failed()
	if failedBefore {
		s.Dump()
	}
	ctx := s.Ctx
	cl := s.Env.Client
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	if !s.Env.Controller().Running() {
		t.Errorf("cleanup: the controller is not running: %v\n%s", s.Env.Controller().ExitErr(), s.Env.Controller().Tail(40))
		s.must(s.Env.StartController(ctx, nil))
		s.marks[s.Env.Controller()] = 0
	}
	// Workloads first, so that draining has nothing to evict; then the claims, so that no
	// NodePool disappears under a live claim; then the rest, classes last.
	_ = cl.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(s.Namespace), bg)
	_ = cl.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(s.Namespace), client.GracePeriodSeconds(0))
	gomega.NewWithT(t).Eventually(func() []corev1.Pod {
		pods := &corev1.PodList{}
		_ = cl.List(ctx, pods, client.InNamespace(s.Namespace))
		return pods.Items
	}).WithTimeout(time.Minute).Should(gomega.BeEmpty(), "pods of the scenario")
	for _, obj := range s.created {
		if _, isGroup := obj.(*ngv1.NodeGroup); isGroup {
			if err := cl.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("cleanup: deleting NodeGroup %s: %v", obj.GetName(), err)
			}
		}
	}
	// Whatever the NodePools' deletion did not take down, Karpenter must, through its claims.
	g := gomega.NewWithT(t)
	ok := g.Eventually(func(g gomega.Gomega) {
		claims, err := s.Env.NodeClaims(ctx, "")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		for i := range claims {
			if claims[i].DeletionTimestamp == nil {
				_ = cl.Delete(ctx, &claims[i])
			}
		}
		g.Expect(names(claims)).To(gomega.BeEmpty(), "NodeClaims left")
		groups, err := s.Env.NodeGroups(ctx)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		var left []string
		for _, ng := range groups {
			if !s.groupBefore[ng.Name] {
				left = append(left, ng.Name)
			}
		}
		g.Expect(left).To(gomega.BeEmpty(), "NodeGroups left")
		nodes := &corev1.NodeList{}
		g.Expect(cl.List(ctx, nodes)).To(gomega.Succeed())
		left = nil
		for _, n := range nodes.Items {
			if !s.nodesBefore[n.Name] {
				left = append(left, n.Name)
			}
		}
		g.Expect(left).To(gomega.BeEmpty(), "Nodes left")
	}).WithTimeout(CleanupTimeout).WithPolling(time.Second).Should(gomega.Succeed())
	for i := len(s.created) - 1; i >= 0; i-- {
		if _, isClass := s.created[i].(*v1alpha1.CleverNodeClass); isClass {
			continue
		}
		if err := cl.Delete(ctx, s.created[i], bg); client.IgnoreNotFound(err) != nil {
			t.Errorf("cleanup: deleting %T %s: %v", s.created[i], s.created[i].GetName(), err)
		}
	}
	_ = cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}, bg)
	for _, obj := range s.created {
		if _, isClass := obj.(*v1alpha1.CleverNodeClass); isClass {
			if err := cl.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("cleanup: deleting CleverNodeClass %s: %v", obj.GetName(), err)
			}
		}
	}
	g.Eventually(func(g gomega.Gomega) {
		for _, obj := range s.created {
			err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			g.Expect(apierrors.IsNotFound(err)).To(gomega.BeTrue(), "%T %s still there (%v)", obj, obj.GetName(), err)
		}
	}).WithTimeout(time.Minute).Should(gomega.Succeed())
	s.Env.RestoreOperator()
	s.Env.Prices.Reset()
	if errs := s.ErrorLines(); len(errs) > 0 {
		t.Errorf("the controller logged %d unexpected error line(s) during the scenario:\n%s", len(errs), strings.Join(errs, "\n"))
	}
	// The engine's leaks were just dropped (RestoreOperator); the controller's memory of them,
	// saved so that it survives restarts, must go too, or the next scenario inherits it.
	if remembers, err := s.Env.QuotaStateRemembers(ctx); err != nil {
		t.Errorf("cleanup: reading the saved quota state: %v", err)
	} else if remembers {
		s.must(s.Env.ForgetQuotaState(ctx))
		s.RestartController(nil)
	}
	if !ok && !failedBefore {
		s.Dump()
	}
	t.Logf("scenario %s: %s including cleanup", s.Name, time.Since(s.start).Round(100*time.Millisecond))
}

func names[T any, P interface {
	*T
	client.Object
}](items []T) []string {
	var out []string
	for i := range items {
		out = append(out, P(&items[i]).GetName())
	}
	return out
}

// Dump logs the controller log tail, recent events and the state of NodeClaims, NodeGroups,
// Nodes and the scenario's pods.
func (s *Scenario) Dump() {
	t, ctx, cl := s.T, s.Ctx, s.Env.Client
	var b strings.Builder
	fmt.Fprintf(&b, "===== dump of scenario %s (work dir %s, cluster dir %s)\n", s.Name, s.Env.Dir(), s.Env.Cluster.Dir())
	fmt.Fprintf(&b, "--- controller log tail (%s)\n%s\n", s.Env.Controller().LogPath, s.Env.Controller().Tail(60))
	if evs, err := s.Env.Events(ctx, ""); err == nil {
		fmt.Fprintf(&b, "--- events since the scenario started\n")
		for _, ev := range evs {
			if stack.EventTime(ev).Before(s.start.Truncate(time.Second)) {
				continue
			}
			fmt.Fprintf(&b, "%s %s %s/%s %s: %s\n", stack.EventTime(ev).Format("15:04:05"), ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
	if claims, err := s.Env.NodeClaims(ctx, ""); err == nil {
		fmt.Fprintf(&b, "--- NodeClaims\n")
		for _, nc := range claims {
			var conds []string
			for _, c := range nc.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
			}
			fmt.Fprintf(&b, "%s pool=%s providerID=%s node=%s deleting=%v %s\n", nc.Name, nc.Labels[karpv1.NodePoolLabelKey], nc.Status.ProviderID, nc.Status.NodeName, nc.DeletionTimestamp != nil, strings.Join(conds, " "))
		}
	}
	if groups, err := s.Env.NodeGroups(ctx); err == nil {
		fmt.Fprintf(&b, "--- NodeGroups\n")
		for _, g := range groups {
			var conds []string
			for _, c := range g.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
			}
			fmt.Fprintf(&b, "%s flavor=%s nodeCount=%d phase=%s deleting=%v owners=%d %s\n", g.Name, g.Spec.Flavor, g.Spec.NodeCount, g.Status.Phase, g.DeletionTimestamp != nil, len(g.OwnerReferences), strings.Join(conds, " "))
		}
	}
	nodes := &corev1.NodeList{}
	if cl.List(ctx, nodes) == nil {
		fmt.Fprintf(&b, "--- Nodes\n")
		for _, n := range nodes.Items {
			var taints []string
			for _, tn := range n.Spec.Taints {
				taints = append(taints, tn.Key+":"+string(tn.Effect))
			}
			fmt.Fprintf(&b, "%s ready=%v providerID=%s flavor=%s pool=%s taints=%v deleting=%v\n", n.Name, sim.NodeReady(&n), n.Spec.ProviderID, n.Labels[corev1.LabelInstanceTypeStable], n.Labels[karpv1.NodePoolLabelKey], taints, n.DeletionTimestamp != nil)
		}
	}
	pods := &corev1.PodList{}
	if cl.List(ctx, pods, client.InNamespace(s.Namespace)) == nil {
		fmt.Fprintf(&b, "--- Pods in %s\n", s.Namespace)
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "%s phase=%s node=%s ready=%v\n", p.Name, p.Status.Phase, p.Spec.NodeName, PodReady(&p))
		}
	}
	t.Log(b.String())
}
