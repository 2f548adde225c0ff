package pricing

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// overlayValidated waits for core's NodeOverlay controller to accept the overlay: it writes
// ValidationSucceeded just before it publishes the overlay's prices to the provider, and a
// pod's first scheduling pass waits out the batch idle time (1 s) after that.
func overlayValidated(s *harness.Scenario, overlay *unstructured.Unstructured) {
	s.T.Helper()
	Eventually(func(g Gomega) {
		got := overlay.DeepCopy()
		g.Expect(env.Client.Get(s.Ctx, client.ObjectKeyFromObject(overlay), got)).To(Succeed())
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		var status any
		for _, c := range conds {
			if c := c.(map[string]any); c["type"] == "ValidationSucceeded" {
				status = c["status"]
			}
		}
		g.Expect(status).To(Equal("True"), "NodeOverlay %s conditions %v", overlay.GetName(), conds)
	}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// examples/node-overlay-price.yaml, with the NodeOverlay gate on: the overlay doubles 2XS's
// price in the default pool, so a 1 vCPU / 1 Gi pod that a 2XS would take (the cheapest by
// list price, see TestExampleGeneralPurposeInflate) gets an XS; deleting the overlay puts 2XS
// back as the cheapest, and consolidation replaces the XS with a 2XS.
func TestNodeOverlayPriceSteersTheFlavor(t *testing.T) {
	s := harness.NewScenario(t, env)
	// With the gate on, core refuses to price or disrupt a NodePool its overlay controller has
	// not evaluated yet, and logs it as an error for the second after the pool is created.
	s.AllowErrors(`nodepool \\"default\\" is awaiting evaluation`)
	s.T.Cleanup(func() { s.RestartController(nil) })
	// The bundle's gates, plus NodeOverlay.
	s.RestartController(map[string]string{"FEATURE_GATES": "NodeRepair=false,ReservedCapacity=false,NodeOverlay=true"})

	s.ApplyExample("general-purpose.yaml")
	s.WaitPoolsReady("default")
	var overlay *unstructured.Unstructured
	for _, o := range s.ApplyExample("node-overlay-price.yaml") {
		if o.GetKind() == "NodeOverlay" {
			overlay = o
		}
	}
	Expect(overlay).NotTo(BeNil())
	overlayValidated(s, overlay)

	d := s.Deployment("overlaid", "default", 1, "1", "1Gi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	Expect(s.PoolFlavors("default")).To(ConsistOf("XS"), "the overlay prices 2XS above XS")

	Expect(env.Client.Delete(s.Ctx, overlay)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(s.PoolFlavors("default")).To(ConsistOf("2XS"))
		running, _ := s.RunningPods(d)
		g.Expect(running).To(Equal(1))
	}).WithTimeout(30*time.Second+harness.DisruptionTimeout).WithPolling(time.Second).Should(Succeed(), "without the overlay, consolidation replaces the XS with the cheaper 2XS")
}
