package bundle_test

import (
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	promql "github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	nodemetrics "sigs.k8s.io/karpenter/pkg/controllers/metrics/node"

	// Everything controller/main.go imports, so that every metric the controller binary
	// registers when its packages initialise is registered in this test binary too
	// (TestMonitoringImportsTheController keeps the list complete).
	_ "github.com/awslabs/operatorpkg/serrors"
	_ "github.com/go-logr/logr"
	_ "github.com/go-logr/zapr"
	_ "github.com/samber/lo"
	_ "k8s.io/klog/v2"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
	_ "sigs.k8s.io/controller-runtime/pkg/log"
	_ "sigs.k8s.io/karpenter/pkg/cloudprovider/metrics"
	_ "sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	_ "sigs.k8s.io/karpenter/pkg/controllers"
	_ "sigs.k8s.io/karpenter/pkg/controllers/node/health"
	_ "sigs.k8s.io/karpenter/pkg/controllers/state"
	_ "sigs.k8s.io/karpenter/pkg/events"
	_ "sigs.k8s.io/karpenter/pkg/operator"
	_ "sigs.k8s.io/karpenter/pkg/operator/injection"
	_ "sigs.k8s.io/karpenter/pkg/operator/logging"
	_ "sigs.k8s.io/karpenter/pkg/operator/options"

	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cli"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/capacity"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/garbagecollection"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/launch"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/nodeclass"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/providerid"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotastate"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotausage"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/leadership"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/pricing"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/version"
)

// monitoring turns both monitoring objects on.
const monitoring = `
prometheusRule:
  enabled: true
  labels: {release: prometheus}
dashboard:
  enabled: true
  namespace: grafana
  labels: {team: platform}
  folder: Karpenter
`

// registerRuntimeMetrics registers the metrics Karpenter core creates when its controllers
// are built rather than when its packages initialise: the node metrics wait for the cloud
// provider's well-known labels. The controller builds them at start-up.
var registerRuntimeMetrics = sync.OnceFunc(func() { nodemetrics.NewController(nil) })

// registered says whether the controller's registry (controller-runtime's, served on
// /metrics) holds a metric family named name. The registry lists no names, but it refuses a
// second family of a name with other help or labels: a probe that registers is a name
// nobody exports.
func registered(name string) (bool, error) {
	registerRuntimeMetrics()
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe of the metric name " + name})
	err := crmetrics.Registry.Register(probe)
	if err == nil {
		crmetrics.Registry.Unregister(probe)
		return false, nil
	}
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) || strings.Contains(err.Error(), "different label names or a different help string") {
		return true, nil
	}
	return false, err
}

// exported says whether a series name in a query is one the controller exports: a family
// name, or a histogram's or summary's _bucket, _sum or _count.
func exported(name string) (bool, error) {
	if ok, err := registered(name); ok || err != nil {
		return ok, err
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return registered(base)
		}
	}
	return false, nil
}

// grafanaVariables are the Grafana variables the dashboard's queries may use, with a value
// that makes them PromQL.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m")

// metricNames parses a query as Prometheus does and returns the metric names it selects.
func metricNames(query string) ([]string, error) {
	expr, err := promql.ParseExpr(query)
	if err != nil {
		return nil, err
	}
	var names []string
	var missing error
	promql.Inspect(expr, func(n promql.Node, _ []promql.Node) error {
		vs, ok := n.(*promql.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type.String() == "=" {
				name = m.Value
			}
		}
		if name == "" {
			missing = errors.New("a selector names no metric: " + vs.String())
		}
		names = append(names, name)
		return nil
	})
	return names, missing
}

// unknownMetrics parses a query and returns the metrics it names that the controller does not
// export.
func unknownMetrics(t *testing.T, query string) []string {
	t.Helper()
	names, err := metricNames(query)
	if err != nil {
		t.Errorf("%q does not parse: %v", query, err)
		return nil
	}
	var unknown []string
	for _, n := range names {
		ok, err := exported(n)
		if err != nil {
			t.Fatalf("probing %s: %v", n, err)
		}
		if !ok {
			unknown = append(unknown, n)
		}
	}
	return unknown
}

// The checker itself: it must know a real metric of each source and reject a renamed one.
func TestMetricCheckerKnowsTheControllersMetrics(t *testing.T) {
	for _, name := range []string{
		"karpenter_clevercloud_nodegroup_launches_overdue",                   // the provider's
		"karpenter_clevercloud_pricing_last_success_timestamp_seconds",       // pricing's
		"karpenter_clevercloud_quota_headroom",                               // the quota tracker's
		"karpenter_clevercloud_nodegroup_acceptance_duration_seconds_bucket", // a histogram's series
		"karpenter_cluster_state_synced",                                     // Karpenter core's
		"karpenter_nodes_allocatable",                                        // core's, built at start-up
		"leader_election_master_status",                                      // controller-runtime's
	} {
		if ok, err := exported(name); !ok || err != nil {
			t.Errorf("%s: exported=%v, %v; want it known", name, ok, err)
		}
	}
	for _, query := range []string{
		"max(karpenter_clevercloud_nodegroup_launches_overdu) > 0",
		"karpenter_clevercloud_nodegroup_acceptance_duration_seconds_total",
		`sum({__name__="karpenter_clevercloud_quota_usage_gb"})`,
	} {
		if got := unknownMetrics(t, query); len(got) != 1 {
			t.Errorf("%q: unknown metrics %v, want the renamed one", query, got)
		}
	}
	if _, err := metricNames("sum(rate(karpenter_nodes_allocatable[5m])"); err == nil {
		t.Error("an unbalanced query parsed")
	}
}

// TestMonitoringImportsTheController: this file imports every package controller/main.go
// imports, or a metric registered by a package only the binary links would look missing.
func TestMonitoringImportsTheController(t *testing.T) {
	imports := func(file string) []string {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, file), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, i := range f.Imports {
			p, _ := strconv.Unquote(i.Path.Value)
			if strings.Contains(strings.Split(p, "/")[0], ".") { // not the standard library
				out = append(out, p)
			}
		}
		return out
	}
	mine := imports("cue/monitoring_test.go")
	for _, p := range imports("controller/main.go") {
		if !slices.Contains(mine, p) {
			t.Errorf("controller/main.go imports %s; import it here too so its metrics are registered", p)
		}
	}
}

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// prometheusRule decodes the rendered PrometheusRule strictly: the fields the Prometheus
// operator's v1 type has, no others.
func prometheusRule(t *testing.T, objs []map[string]any) ([]rule, map[string]any) {
	t.Helper()
	obj := find(objs, "PrometheusRule", "karpenter")
	if obj == nil {
		t.Fatal("no PrometheusRule rendered")
	}
	var pr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []rule `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := strict(obj, &pr); err != nil {
		t.Fatalf("PrometheusRule: %v", err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || len(pr.Spec.Groups) != 1 {
		t.Fatalf("PrometheusRule %s with %d groups", pr.APIVersion, len(pr.Spec.Groups))
	}
	return pr.Spec.Groups[0].Rules, pr.Metadata
}

var heading = regexp.MustCompile(`(?m)^## (\S+)$`)

func TestPrometheusRule(t *testing.T) {
	rules, meta := prometheusRule(t, mustRender(t, renderOpts{values: monitoring}))
	if labels := meta["labels"].(map[string]any); labels["release"] != "prometheus" || labels["app.kubernetes.io/name"] != "karpenter" {
		t.Errorf("PrometheusRule labels %v: want the values' and the bundle's", labels)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs/alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	runbooks := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(string(doc), -1) {
		runbooks[m[1]] = true
	}
	var alerts []string
	for _, r := range rules {
		alerts = append(alerts, r.Alert)
		if unknown := unknownMetrics(t, r.Expr); len(unknown) > 0 {
			t.Errorf("alert %s uses metrics the controller does not export: %v", r.Alert, unknown)
		}
		if r.For != "" {
			if _, err := model.ParseDuration(r.For); err != nil {
				t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			}
		}
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
			t.Errorf("alert %s: severity %q", r.Alert, r.Labels["severity"])
		}
		if r.Annotations["summary"] == "" {
			t.Errorf("alert %s has no summary", r.Alert)
		}
		want := "https://github.com/CleverCloud/karpenter-provider-clever-cloud/blob/main/docs/alerts.md#" + strings.ToLower(r.Alert)
		if r.Annotations["runbook_url"] != want {
			t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		if !runbooks[r.Alert] {
			t.Errorf("alert %s has no runbook: add a \"## %s\" section to docs/alerts.md", r.Alert, r.Alert)
		}
	}
	for rb := range runbooks {
		if !slices.Contains(alerts, rb) {
			t.Errorf("docs/alerts.md has a runbook for %s, which the PrometheusRule does not define", rb)
		}
	}
	// What the alerts must cover, by the metric each failure mode shows in.
	covered := map[string]bool{}
	for _, r := range rules {
		names, _ := metricNames(r.Expr)
		for _, n := range names {
			covered[n] = true
		}
	}
	for _, m := range []string{
		"karpenter_clevercloud_nodegroup_quota_rejections_total",
		"karpenter_clevercloud_quota_headroom",
		"karpenter_pods_state",
		"karpenter_clevercloud_nodegroup_refusals_total",
		"karpenter_clevercloud_nodegroup_late_refusals_total",
		"karpenter_clevercloud_nodegroup_launches_overdue",
		"karpenter_clevercloud_nodegroup_vanished_total",
		"karpenter_clevercloud_nodegroup_garbage_collection_refused",
		"karpenter_clevercloud_pricing_last_success_timestamp_seconds",
		"leader_election_master_status",
		"karpenter_cluster_state_unsynced_time_seconds",
		"karpenter_clevercloud_settings_refused",
		"karpenter_clevercloud_catalog_overrides_valid",
	} {
		if !covered[m] {
			t.Errorf("no alert watches %s", m)
		}
	}
}

// The prices alert follows the refresh period, and alerts that cannot hold for the chosen
// settings are left out instead of firing for ever.
func TestPrometheusRuleFollowsSettings(t *testing.T) {
	exprOf := func(rules []rule, alert string) string {
		for _, r := range rules {
			if r.Alert == alert {
				return r.Expr
			}
		}
		return ""
	}
	rules, _ := prometheusRule(t, mustRender(t, renderOpts{values: monitoring + "settings: {pricing: {refreshPeriod: 1h}}\n"}))
	if e := exprOf(rules, "KarpenterCleverCloudPricesStale"); !strings.HasSuffix(e, "> 7200") {
		t.Errorf("prices alert %q: want two refresh periods, 7200 s", e)
	}
	rules, _ = prometheusRule(t, mustRender(t, renderOpts{values: monitoring + "settings: {pricing: {enabled: false}, disableLeaderElection: true}\n"}))
	for _, a := range []string{"KarpenterCleverCloudPricesStale", "KarpenterNotLeading"} {
		if exprOf(rules, a) != "" {
			t.Errorf("%s rendered although its metric cannot be healthy with these settings", a)
		}
	}
}

func TestDashboard(t *testing.T) {
	objs := mustRender(t, renderOpts{values: monitoring})
	var cm corev1.ConfigMap
	if err := strict(find(objs, "ConfigMap", "karpenter-dashboard"), &cm); err != nil {
		t.Fatalf("dashboard ConfigMap: %v", err)
	}
	if cm.Namespace != "grafana" || cm.Labels["grafana_dashboard"] != "1" || cm.Labels["team"] != "platform" || cm.Annotations["grafana_folder"] != "Karpenter" {
		t.Errorf("dashboard ConfigMap %s labels %v annotations %v: want namespace, discovery label, labels and folder from the values", cm.Namespace, cm.Labels, cm.Annotations)
	}
	if len(cm.Data) != 1 {
		t.Fatalf("dashboard ConfigMap holds %d files, want one", len(cm.Data))
	}
	var dash struct {
		UID    string
		Title  string
		Panels []struct {
			Title   string
			GridPos struct{ X, Y, W, H int }
			Targets []struct {
				RefID string
				Expr  string
			}
		}
	}
	for _, js := range cm.Data {
		if err := json.Unmarshal([]byte(js), &dash); err != nil {
			t.Fatalf("dashboard JSON: %v", err)
		}
	}
	if dash.UID == "" || len(dash.Panels) < 6 {
		t.Fatalf("dashboard %q with %d panels", dash.UID, len(dash.Panels))
	}
	shown := map[string]bool{}
	cells := map[[2]int]string{}
	for _, p := range dash.Panels {
		if prev, ok := cells[[2]int{p.GridPos.X, p.GridPos.Y}]; ok {
			t.Errorf("panels %q and %q overlap", prev, p.Title)
		}
		cells[[2]int{p.GridPos.X, p.GridPos.Y}] = p.Title
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			query := grafanaVariables.Replace(tg.Expr)
			if unknown := unknownMetrics(t, query); len(unknown) > 0 {
				t.Errorf("panel %q uses metrics the controller does not export: %v", p.Title, unknown)
			}
			names, _ := metricNames(query)
			for _, n := range names {
				shown[n] = true
			}
		}
	}
	for what, m := range map[string]string{
		"nodes by flavor":             "karpenter_nodes_allocatable",
		"their cost":                  "karpenter_clevercloud_catalog_flavor_price_hourly",
		"pending pods":                "karpenter_pods_state",
		"launch latency":              "karpenter_clevercloud_nodegroup_acceptance_duration_seconds_bucket",
		"quota use":                   "karpenter_clevercloud_quota_usage",
		"the quota limit":             "karpenter_clevercloud_quota_limit",
		"quota refusals":              "karpenter_clevercloud_nodegroup_quota_rejections_total",
		"other refusals":              "karpenter_clevercloud_nodegroup_refusals_total",
		"disruptions":                 "karpenter_nodeclaims_disrupted_total",
		"launches by platform answer": "karpenter_clevercloud_nodegroup_launches_total",
	} {
		if !shown[m] {
			t.Errorf("the dashboard does not show %s (%s)", what, m)
		}
	}
}

func TestMonitoringOffByDefault(t *testing.T) {
	var kinds []string
	for _, o := range mustRender(t, renderOpts{}) {
		kinds = append(kinds, o["kind"].(string)+"/"+o["metadata"].(map[string]any)["name"].(string))
	}
	sort.Strings(kinds)
	for _, k := range []string{"PrometheusRule/karpenter", "ConfigMap/karpenter-dashboard"} {
		if slices.Contains(kinds, k) {
			t.Errorf("%s rendered by default", k)
		}
	}
	objs := mustRender(t, renderOpts{values: "dashboard: {enabled: true}\n"})
	var cm corev1.ConfigMap
	if err := strict(find(objs, "ConfigMap", "karpenter-dashboard"), &cm); err != nil || cm.Namespace != "karpenter" || cm.Annotations["grafana_folder"] != "" {
		t.Errorf("dashboard by default must sit with the controller, no folder: %s %v %v", cm.Namespace, cm.Annotations, err)
	}
	if find(objs, "PrometheusRule", "karpenter") != nil {
		t.Error("the dashboard switch rendered the PrometheusRule")
	}
}
