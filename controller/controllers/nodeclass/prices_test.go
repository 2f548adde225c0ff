package nodeclass_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/nodeclass"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/pricing"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/priceapi"
)

// flipWithin bounds how long PricesCurrent may lag the refresher: the condition is driven
// by the refresher's signal, so a reconcile's latency, not a polling interval.
const flipWithin = 3 * time.Second

const period = 12 * time.Hour

// PricesCurrent follows the refresher within seconds, in both directions, against a real
// apiserver and manager: True right after a refresh (saying where availability comes from),
// False as soon as the staleness deadline passes on the refresher's (fake) clock — the
// controller's own requeue is a day away then, so only the refresher's signal can flip it.
func TestPricesCurrentFollowsTheRefresher(t *testing.T) {
	g := NewWithT(t)
	api := priceapi.New() // today's API: the product listing answers 401
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	t.Cleanup(api.Close)
	s := settings.Defaults()
	s.Pricing.APIURL = srv.URL
	s.Pricing.RefreshPeriod.Duration = period
	s.Topology = "ALL_IN_ONE"
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	base, err := catalog.LoadBase()
	g.Expect(err).NotTo(HaveOccurred())
	refresher, err := pricing.New(s, base.Rates, srv.Client(), clk, func(context.Context, pricing.Update) error { return nil })
	g.Expect(err).NotTo(HaveOccurred())

	startController(t, refresher)
	ctx := t.Context()

	class := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "prices"}}
	g.Expect(env.Client.Create(ctx, class)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
	condition := func() *status.Condition {
		got := &v1alpha1.CleverNodeClass{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
		return got.StatusConditions().Get(v1alpha1.ConditionPricesCurrent)
	}
	expect := func(want metav1.ConditionStatus, reason string, within time.Duration) *status.Condition {
		t.Helper()
		var cond *status.Condition
		g.Eventually(func(g Gomega) {
			cond = condition()
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(want), "PricesCurrent %+v", cond)
			g.Expect(cond.Reason).To(Equal(reason))
		}).WithTimeout(within).WithPolling(20 * time.Millisecond).Should(Succeed())
		return cond
	}

	// No refresh yet: the embedded catalogue, said as such.
	expect(metav1.ConditionUnknown, nodeclass.PricesPending, 30*time.Second)

	// A refresh on today's API: prices current, availability from the catalogue, the 401 and
	// the ignored topology said once in the message.
	g.Expect(refresher.Refresh(ctx)).To(Succeed())
	cond := expect(metav1.ConditionTrue, nodeclass.PricesProductListingUnavailable, flipWithin)
	g.Expect(cond.Message).To(Equal("prices refreshed at 2026-12-01T00:00:00Z from the price system; " +
		"flavor availability comes from the catalogue because the product listing answered HTTP status 401 Unauthorized; " +
		`topology "ALL_IN_ONE" (CLEVER_CLOUD_TOPOLOGY) is ignored until the listing is readable`))

	// The listing comes back (the legacy API): availability and topology from it.
	api.SetLegacyProduct(true)
	clk.Step(time.Hour)
	g.Expect(refresher.Refresh(ctx)).To(Succeed())
	cond = expect(metav1.ConditionTrue, nodeclass.PricesRefreshed, flipWithin)
	g.Expect(cond.Message).To(Equal(`prices refreshed at 2026-12-01T01:00:00Z; flavors offered as the product listing lists them for topology "ALL_IN_ONE"`))

	// The API breaks: still current while within two periods of the last success...
	api.SetFault(priceapi.ServerError)
	clk.Step(time.Hour)
	g.Expect(refresher.Refresh(ctx)).NotTo(Succeed())
	g.Consistently(func() string { return string(condition().Status) }).
		WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Equal(string(metav1.ConditionTrue)))
	// ...and False as soon as the deadline passes, with no refresh attempt to announce it.
	clk.Step(pricing.StaleAfterPeriods*period - time.Hour + time.Nanosecond)
	cond = expect(metav1.ConditionFalse, nodeclass.PricesRefreshFailing, flipWithin)
	g.Expect(cond.Message).To(ContainSubstring("last known good catalogue from 2026-12-01T01:00:00Z"))
	g.Expect(cond.Message).To(ContainSubstring("HTTP status 500"))

	// It heals: True again right after the refresh.
	api.SetFault(priceapi.Healthy)
	g.Expect(refresher.Refresh(ctx)).To(Succeed())
	expect(metav1.ConditionTrue, nodeclass.PricesRefreshed, flipWithin)
}
