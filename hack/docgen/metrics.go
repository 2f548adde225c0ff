package main

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	// Every package that registers metrics, linked here so that its init registers them;
	// TestEveryRegisteringPackageIsLinked fails when one is missing.
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/garbagecollection"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/launch"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/metrics"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/pricing"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// Metric is one metric as /metrics serves it.
type Metric struct {
	Name, Help, Type string
	// Labels in the order the metric declares them.
	Labels []string
	// Buckets are a histogram's upper bounds.
	Buckets []float64
}

// Metrics are the provider's metrics, sorted by name. Each collector is registered on a
// registry of its own and gathered; a vector, which serves nothing until it has a child,
// is given one with placeholder label values for the gathering, then the child is removed.
func Metrics() ([]Metric, error) {
	var out []Metric
	for _, c := range metrics.Collectors() {
		ms, err := describe(c)
		if err != nil {
			return nil, fmt.Errorf("%T: %w", c, err)
		}
		out = append(out, ms...)
	}
	slices.SortFunc(out, func(a, b Metric) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(out); i++ {
		if out[i].Name == out[i-1].Name {
			return nil, fmt.Errorf("metric %s is registered twice", out[i].Name)
		}
	}
	return out, nil
}

// vector is what every prometheus *Vec has.
type vector interface {
	DeleteLabelValues(...string) bool
}

func describe(c prometheus.Collector) ([]Metric, error) {
	var placeholders []string
	if v, ok := c.(vector); ok {
		n, err := addChild(c)
		if err != nil {
			return nil, err
		}
		for i := range n {
			placeholders = append(placeholders, "l"+strconv.Itoa(i))
		}
		defer v.DeleteLabelValues(placeholders...)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	families, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	if len(families) == 0 {
		return nil, fmt.Errorf("gathered nothing")
	}
	var out []Metric
	for _, f := range families {
		m := Metric{Name: f.GetName(), Help: f.GetHelp(), Type: strings.ToLower(f.GetType().String())}
		// A vector may have children of its own already: read the placeholder one.
		var series *dto.Metric
		for _, s := range f.GetMetric() {
			if ours(s, placeholders) {
				series = s
			}
		}
		if series == nil {
			return nil, fmt.Errorf("%s: no series with the placeholder labels gathered", m.Name)
		}
		m.Labels = make([]string, len(placeholders))
		for _, lp := range series.GetLabel() {
			i := slices.Index(placeholders, lp.GetValue())
			if i < 0 {
				return nil, fmt.Errorf("%s: label %s is not one of the vector's", m.Name, lp.GetName())
			}
			m.Labels[i] = lp.GetName()
		}
		if h := series.GetHistogram(); h != nil {
			for _, b := range h.GetBucket() {
				m.Buckets = append(m.Buckets, b.GetUpperBound())
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// ours says whether every label of the series holds a placeholder value.
func ours(s *dto.Metric, placeholders []string) bool {
	if len(s.GetLabel()) != len(placeholders) {
		return false
	}
	for _, lp := range s.GetLabel() {
		if !slices.Contains(placeholders, lp.GetValue()) {
			return false
		}
	}
	return true
}

// addChild gives a vector one child, trying label counts until the vector takes one, and
// returns the count.
func addChild(c prometheus.Collector) (int, error) {
	get := reflect.ValueOf(c).MethodByName("GetMetricWithLabelValues")
	if !get.IsValid() {
		return 0, fmt.Errorf("a vector without GetMetricWithLabelValues")
	}
	for n := range 16 {
		args := make([]reflect.Value, n)
		for i := range n {
			args[i] = reflect.ValueOf("l" + strconv.Itoa(i))
		}
		res := get.Call(args)
		if err, _ := res[len(res)-1].Interface().(error); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("no label count up to 15 fits")
}

// MetricsPage is docs/reference/metrics.md.
func MetricsPage() ([]byte, error) {
	ms, err := Metrics()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(generatedHeader("Metrics", "go run ./hack/docgen"))
	fmt.Fprintf(&b, "Every metric the provider registers, %d in all, served with Karpenter core's and\n", len(ms))
	b.WriteString("controller-runtime's on the controller's `/metrics` endpoint (`METRICS_PORT`, 8080; the\n")
	b.WriteString("bundle's Service `karpenter`, port `http-metrics`). Each section gives the type, the labels\n")
	b.WriteString("in declaration order and the help text as `/metrics` serves it. The names are stable:\n")
	b.WriteString("alerts (`cue/prometheusrule.cue`) and the dashboard (`cue/dashboard.cue`) use them, and a\n")
	b.WriteString("test fails when either names a metric that is not registered.\n\n")
	b.WriteString("Core's own metrics (`karpenter_nodeclaims_*`, `karpenter_pods_*`, `karpenter_cluster_state_*`,\n")
	b.WriteString("`karpenter_cloudprovider_*` …) are listed in Karpenter's documentation for core v1.15.\n\n")

	b.WriteString("| metric | type | labels |\n|---|---|---|\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s |\n", m.Name, m.Name, m.Type, labelList(m.Labels))
	}
	for _, m := range ms {
		fmt.Fprintf(&b, "\n## %s\n\n", m.Name)
		fmt.Fprintf(&b, "- type: %s\n", m.Type)
		fmt.Fprintf(&b, "- labels: %s\n", labelList(m.Labels))
		if len(m.Buckets) > 0 {
			bs := make([]string, len(m.Buckets))
			for i, u := range m.Buckets {
				bs[i] = strconv.FormatFloat(u, 'g', -1, 64)
			}
			fmt.Fprintf(&b, "- buckets (upper bounds): %s\n", strings.Join(bs, ", "))
		}
		fmt.Fprintf(&b, "\n%s\n", m.Help)
	}
	return b.Bytes(), nil
}

func labelList(ls []string) string {
	if len(ls) == 0 {
		return "none"
	}
	q := make([]string, len(ls))
	for i, l := range ls {
		q[i] = "`" + l + "`"
	}
	return strings.Join(q, ", ")
}

// generatedHeader opens every page: a title and the line saying where it comes from.
func generatedHeader(title, cmd string) string {
	return fmt.Sprintf("# %s reference\n\n<!-- Generated by %s (make generate); do not edit. make verify fails when it is stale. -->\n\n", title, cmd)
}
