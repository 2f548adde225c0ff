package pricing

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// Default public-beta rates, as the fake price API serves them.
const (
	vcpuRate = 0.00277777777
	ramRate  = 0.00555555555
)

// renderFlavorsConfig renders the bundle with flavors/pins.cue replaced by pins, the way
// `cue export ./cue` does after a user edits that file, and returns the flavors ConfigMap's
// file as the controller would mount it.
func renderFlavorsConfig(t *testing.T, pins string) string {
	t.Helper()
	root := stack.ModuleRoot()
	t.Setenv("CUE_REGISTRY", "none")
	cfg := &load.Config{Dir: root, Overlay: map[string]load.Source{
		filepath.Join(root, "flavors", "pins.cue"): load.FromString("package flavors\n\n#pins: " + pins + "\n"),
	}}
	insts := load.Instances([]string{"./cue"}, cfg)
	Expect(insts).To(HaveLen(1))
	Expect(insts[0].Err).NotTo(HaveOccurred())
	v := cuecontext.New().BuildInstance(insts[0])
	var objs []map[string]any
	Expect(v.LookupPath(cue.ParsePath("appList")).Decode(&objs)).To(Succeed())
	for _, o := range objs {
		if o["kind"] != "ConfigMap" {
			continue
		}
		var cm corev1.ConfigMap
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o, &cm)).To(Succeed())
		if data, ok := cm.Data["flavors.yaml"]; ok {
			path := filepath.Join(t.TempDir(), "flavors.yaml")
			Expect(os.WriteFile(path, []byte(data), 0o600)).To(Succeed())
			return path
		}
	}
	t.Fatalf("the bundle rendered with pins %s has no flavors ConfigMap", pins)
	return ""
}

// pricesCurrent waits for the class's PricesCurrent condition to have status and reason, and
// returns its message.
func pricesCurrent(s *harness.Scenario, class *v1alpha1.CleverNodeClass, want metav1.ConditionStatus, reason string) string {
	s.T.Helper()
	var msg string
	Eventually(func(g Gomega) {
		got := &v1alpha1.CleverNodeClass{}
		g.Expect(s.Env.Client.Get(s.Ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
		cond := got.StatusConditions().Get(v1alpha1.ConditionPricesCurrent)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(want), "PricesCurrent %+v", cond)
		g.Expect(cond.Reason).To(Equal(reason))
		msg = cond.Message
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return msg
}

// restoreController puts the controller back as the bundle ships it after the scenario.
func restoreController(s *harness.Scenario) {
	s.T.Cleanup(func() {
		s.Env.Prices.Reset()
		s.RestartController(nil)
	})
}

// A pin in flavors/pins.cue, rendered into the bundle's ConfigMap, is the price the
// controller decides with: M pinned below 2XS wins a pod that 2XS would have taken.
func TestPinnedPriceInFlavorsDecidesTheFlavor(t *testing.T) {
	s := harness.NewScenario(t, env)
	restoreController(s)
	path := renderFlavorsConfig(t, `[{name: "M", priceHourly: 0.02}]`)
	s.RestartController(map[string]string{"FLAVORS_CONFIG_PATH": path})
	Expect(s.Metric("karpenter_clevercloud_catalog_flavor_price_hourly", map[string]string{"flavor": "M"})).To(Equal(0.02))
	Expect(s.Metric("karpenter_clevercloud_catalog_overrides_valid", nil)).To(Equal(1.0))

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS", "M"}, time.Minute, harness.OnDemand)
	d := s.Deployment("pinned", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("M"))
}

// A rate change on the public API reprices every flavor at the next refresh, and Karpenter
// replaces the node with the new cheapest flavor. The price system alone carries the rates:
// the product listing answers 401, as on today's API. XS is pinned at 0.05 EUR/h; at the default
// rates 2XS (0.0333) is cheaper, at a vCPU rate of 0.01 it costs 0.0622 and XS wins.
func TestRateChangeReplacesTheNodeWithTheNewCheapestFlavor(t *testing.T) {
	s := harness.NewScenario(t, env)
	restoreController(s)
	path := filepath.Join(t.TempDir(), "flavors.yaml")
	Expect(os.WriteFile(path, []byte("- name: XS\n  priceHourly: 0.05\n"), 0o600)).To(Succeed())
	s.RestartController(map[string]string{"FLAVORS_CONFIG_PATH": path, "PRICING_REFRESH_PERIOD": "5s"})

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS", "XS"}, 5*time.Second, harness.OnDemand)
	d := s.Deployment("repriced", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("2XS"))

	s.Env.Prices.SetRates(0.01, ramRate)
	Eventually(func() float64 {
		return s.Metric("karpenter_clevercloud_catalog_flavor_price_hourly", map[string]string{"flavor": "2XS"})
	}).WithTimeout(30 * time.Second).Should(Equal(0.0622))
	Eventually(func(g Gomega) {
		g.Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("XS"))
		running, _ := s.RunningPods(d)
		g.Expect(running).To(Equal(1))
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

// On today's API the product listing answers 401: prices still refresh from the price
// system, no flavor is withdrawn (availability is the catalogue's), and the configured
// topology, which only the listing can apply, is ignored and said so. ALL_IN_ONE does not list
// 2XS, so a pod landing on a 2XS shows the topology was not applied. Nothing is logged as an
// error: the scenario's log check fails on any error line.
func TestPricesRefreshWhileTheProductListingAnswers401(t *testing.T) {
	s := harness.NewScenario(t, env)
	restoreController(s)
	s.RestartController(map[string]string{"CLEVER_CLOUD_TOPOLOGY": "ALL_IN_ONE"})
	Eventually(func() float64 {
		return s.Metric("karpenter_clevercloud_pricing_last_success_timestamp_seconds", nil)
	}).WithTimeout(time.Minute).WithPolling(250*time.Millisecond).Should(BeNumerically(">", 0), "a successful price refresh")
	Expect(s.Metric("karpenter_clevercloud_pricing_product_listing_available", nil)).To(Equal(0.0))
	Expect(s.Metric("karpenter_clevercloud_pricing_consecutive_failures", nil)).To(Equal(0.0))

	class := s.NodeClass("", nil)
	msg := pricesCurrent(s, class, metav1.ConditionTrue, "ProductListingUnavailable")
	Expect(msg).To(ContainSubstring("flavor availability comes from the catalogue because the product listing answered HTTP status 401"))
	Expect(msg).To(ContainSubstring(`topology "ALL_IN_ONE" (CLEVER_CLOUD_TOPOLOGY) is ignored`))

	pool := s.NodePool("", class, []string{"2XS", "S"}, time.Minute, harness.OnDemand)
	d := s.Deployment("no-listing", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("2XS"))
}

// The legacy API, which served the product listing without a token: the listing decides
// availability again, for the configured topology only (ALL_IN_ONE has no 2XS, so S wins).
func TestLegacyProductListingRestrictsToTheTopology(t *testing.T) {
	s := harness.NewScenario(t, env)
	restoreController(s) // its Reset puts the fake back to answering 401
	s.Env.Prices.SetLegacyProduct(true)
	s.RestartController(map[string]string{"CLEVER_CLOUD_TOPOLOGY": "ALL_IN_ONE"})
	Eventually(func() float64 {
		return s.Metric("karpenter_clevercloud_pricing_product_listing_available", nil)
	}).WithTimeout(time.Minute).WithPolling(250*time.Millisecond).Should(Equal(1.0), "a refresh that read the listing")

	class := s.NodeClass("", nil)
	msg := pricesCurrent(s, class, metav1.ConditionTrue, "Refreshed")
	Expect(msg).To(ContainSubstring(`flavors offered as the product listing lists them for topology "ALL_IN_ONE"`))

	pool := s.NodePool("", class, []string{"2XS", "S"}, time.Minute, harness.OnDemand)
	d := s.Deployment("listed", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("S"))
}

// With the price API down the controller starts, provisions on the embedded catalogue, and
// says on the CleverNodeClass that prices are not current.
func TestProvisionsWhileThePriceAPIIsDown(t *testing.T) {
	s := harness.NewScenario(t, env)
	s.AllowErrors(`refresh`, `price`)
	restoreController(s)
	s.Env.Prices.SetFault("error")
	s.RestartController(nil)

	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, []string{"2XS", "XS"}, time.Minute, harness.OnDemand)
	d := s.Deployment("offline", pool.Name, 1, "1", "1Gi")
	s.WaitRunning(d, 1, harness.LaunchTimeout)
	Expect(s.PoolFlavors(pool.Name)).To(ConsistOf("2XS"))
	Expect(s.Metric("karpenter_clevercloud_catalog_flavor_price_hourly", map[string]string{"flavor": "2XS"})).To(Equal(0.0333))
	Expect(pricesCurrent(s, class, metav1.ConditionFalse, "RefreshFailing")).To(ContainSubstring("embedded catalogue"))
	got := &v1alpha1.CleverNodeClass{}
	Expect(s.Env.Client.Get(s.Ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
	Expect(got.StatusConditions().Root().IsTrue()).To(BeTrue(), "stale prices never block provisioning")
}
