package preflight_test

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/version"
)

func testLogger(t *testing.T) logr.Logger { return testr.New(t) }

// gauge reads a gauge's value (prometheus/testutil pulls a module go.mod does not require).
func gauge(m prometheus.Gauge) float64 {
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		panic(err)
	}
	return pb.GetGauge().GetValue()
}

func splitDocs(stream string) []string { return strings.Split(stream, "\n---\n") }

func TestExitCode(t *testing.T) {
	g := NewWithT(t)
	g.Expect(preflight.Report{{Result: preflight.Pass}}.ExitCode()).To(Equal(0))
	g.Expect(preflight.Report{{Result: preflight.Pass}, {Result: preflight.Warn}}.ExitCode()).To(Equal(2))
	g.Expect(preflight.Report{{Result: preflight.Fail}, {Result: preflight.Warn}}.ExitCode()).To(Equal(1))
	g.Expect(preflight.Report{{Result: preflight.Warn}, {Result: preflight.Fail}}.ExitCode()).To(Equal(1))
}

func TestReportLines(t *testing.T) {
	g := NewWithT(t)
	var b strings.Builder
	g.Expect(preflight.Report{
		{Name: "flavors", Result: preflight.Pass, Found: "ok"},
		{Name: "quota", Result: preflight.Warn, Found: "tight", Action: "raise it"},
	}.Write(&b)).To(Succeed())
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	g.Expect(lines).To(HaveLen(4))
	g.Expect(lines[0]).To(HavePrefix("PASS flavors"))
	g.Expect(lines[1]).To(HavePrefix("WARN quota"))
	g.Expect(lines[2]).To(ContainSubstring("→ raise it"))
	g.Expect(lines[3]).To(Equal("1 passed, 1 warned, 0 failed (exit 2)"))
}

func TestKubernetesMinor(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]string{"v1.37.2": "1.37", "v1.37.0-clevercloud.1": "1.37", "1.36+": "1.36", "v1.38.0-alpha.1": "1.38"} {
		got, err := version.KubernetesMinor(in)
		g.Expect(err).NotTo(HaveOccurred(), in)
		g.Expect(got).To(Equal(want), in)
	}
	for _, bad := range []string{"", "v1", "vX.37", "1.x"} {
		_, err := version.KubernetesMinor(bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
}

// The env-to-values map follows the settings type's tags, nested settings included.
func TestSettingsByEnv(t *testing.T) {
	g := NewWithT(t)
	m := preflight.SettingsByEnv()
	g.Expect(m).To(HaveKeyWithValue("LOG_LEVEL", []string{"logLevel"}))
	g.Expect(m).To(HaveKeyWithValue("PRICING_API_URL", []string{"pricing", "apiURL"}))
	g.Expect(m).To(HaveKeyWithValue("CLEVER_CLOUD_QUOTA_CPU", []string{"quota", "cpu"}))
	g.Expect(m).NotTo(HaveKey("FLAVORS_CONFIG_PATH"), "rendered by the bundle from settings.flavors")
}

// A user's affinity keeps its terms and gains the one that keeps the controller off
// Karpenter's nodes, in every required term.
func TestWithOffKarpenter(t *testing.T) {
	g := NewWithT(t)
	infra := corev1.NodeSelectorRequirement{Key: "node-role.example/infra", Operator: corev1.NodeSelectorOpExists}
	in := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{infra}}, preflight.DefaultRequiredAffinity},
	}}}
	out := preflight.WithOffKarpenter(in)
	terms := out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	g.Expect(terms[0].MatchExpressions).To(Equal([]corev1.NodeSelectorRequirement{infra, preflight.DefaultRequiredAffinity.MatchExpressions[0]}))
	g.Expect(terms[1]).To(Equal(preflight.DefaultRequiredAffinity), "not added twice")
	g.Expect(in.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions).To(HaveLen(1), "input untouched")
	// Pod anti-affinity only: a required term is added.
	only := preflight.WithOffKarpenter(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}})
	g.Expect(only.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms).To(Equal([]corev1.NodeSelectorTerm{preflight.DefaultRequiredAffinity}))
}
