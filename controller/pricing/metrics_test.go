package pricing

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/priceapi"
)

// The metrics are public API for dashboards and alerts: pin their names, and keep them
// within Prometheus' naming conventions.
func TestMetricsRegisteredAndLintClean(t *testing.T) {
	h := newHarness(t, nil)
	h.api.SetFault(priceapi.ServerError)
	_ = h.r.Refresh(context.Background()) // gives the failures vector a child to gather
	ReportRates(loadBase(t).Rates)        // as the controller does at start-up: the rate vector's children
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ours []*dto.MetricFamily
	names := map[string]bool{}
	for _, mf := range families {
		if strings.HasPrefix(mf.GetName(), "karpenter_clevercloud_pricing_") {
			ours = append(ours, mf)
			names[mf.GetName()] = true
		}
	}
	for _, want := range []string{
		"karpenter_clevercloud_pricing_refresh_attempts_total",
		"karpenter_clevercloud_pricing_refresh_failures_total",
		"karpenter_clevercloud_pricing_product_listing_available",
		"karpenter_clevercloud_pricing_consecutive_failures",
		"karpenter_clevercloud_pricing_last_success_timestamp_seconds",
		"karpenter_clevercloud_pricing_rate_hourly",
	} {
		if !names[want] {
			t.Errorf("metric %s not registered on controller-runtime's registry", want)
		}
	}
	problems, err := promlint.NewWithMetricFamilies(ours).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// The fake API's own server, as the simulated CKE runs it, serves the refresher too.
func TestAgainstRunningFakeAPI(t *testing.T) {
	api, err := priceapi.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := api.Close(); err != nil {
			t.Error(err)
		}
	})
	var got []Update
	s := settingsFor(api.URL)
	base := loadBase(t).Rates
	r, err := New(s, base, nil, nil, func(_ context.Context, u Update) error { got = append(got, u); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	api.SetRates(0.0030, 0.0060)
	if err := r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Rates != base || got[1].Rates.VCPUHourly != 0.0030 || got[1].Rates.RAMGBHourly != 0.0060 {
		t.Fatalf("updates %+v", got)
	}
	if p := price(got[1].Rates, 10, 16); p != 0.126 {
		t.Fatalf("M at the new rates: %v, want 0.126", p)
	}
}
