package disruption

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Drift: changing the CleverNodeClass's labels marks the claim Drifted and rolls it; the
// new node carries the new label from the moment it joins (seen on its very first watch event).
func TestDrift(t *testing.T) {
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", map[string]string{"example.com/rev": "one"})
	pool := s.NodePool("", class, nil, time.Hour)
	d := s.Deployment("drifter", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	old := s.PoolGroups(pool.Name)
	Expect(old).To(HaveLen(1))
	oldNode := ngv1.NodeName(old[0].Name, 0)

	// Labels of every node of the pool as first seen.
	w, err := env.Client.Watch(s.Ctx, &corev1.NodeList{})
	Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var mu sync.Mutex
	firstSeen := map[string]map[string]string{}
	go func() {
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			mu.Lock()
			if _, seen := firstSeen[n.Name]; !seen {
				firstSeen[n.Name] = n.Labels
			}
			mu.Unlock()
		}
	}()

	harness.Update(s, class.DeepCopy(), func(c *v1alpha1.CleverNodeClass) { c.Spec.Labels["example.com/rev"] = "two" })

	Eventually(func(g Gomega) {
		nc := &karpv1.NodeClaim{}
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: old[0].Name}, nc)).To(Succeed())
		g.Expect(nc.StatusConditions().Get(karpv1.ConditionTypeDrifted).IsTrue()).To(BeTrue(), "claim Drifted")
	}).WithTimeout(time.Minute).Should(Succeed())

	var fresh ngv1.NodeGroup
	Eventually(func(g Gomega) {
		groups := s.PoolGroups(pool.Name)
		g.Expect(groups).To(HaveLen(1))
		g.Expect(groups[0].Name).NotTo(Equal(old[0].Name), "the drifted group is replaced")
		fresh = groups[0]
		err := env.Client.Get(s.Ctx, client.ObjectKey{Name: oldNode}, &corev1.Node{})
		g.Expect(err).To(HaveOccurred(), "old node gone")
	}).WithTimeout(harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed())
	Expect(fresh.Spec.Labels).To(HaveKeyWithValue("example.com/rev", "two"))
	pods := s.WaitRunning(d, 1, time.Minute)
	newNode := ngv1.NodeName(fresh.Name, 0)
	Expect(pods[0].Spec.NodeName).To(Equal(newNode))
	mu.Lock()
	defer mu.Unlock()
	Expect(firstSeen).To(HaveKey(newNode))
	Expect(firstSeen[newNode]).To(HaveKeyWithValue("example.com/rev", "two"), "label present when the node joined")
	Expect(s.Metric("karpenter_voluntary_disruption_decisions_total", map[string]string{"reason": "drifted"})).To(BeNumerically(">=", 1))
}
