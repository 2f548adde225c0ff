package catalog

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestParseOverridesPartialEntries(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want []Override
	}{
		{"empty document", "", nil},
		{"empty list", "[]", []Override{}},
		{"price only", "- name: M\n  priceHourly: 0.1167\n",
			[]Override{{Name: "M", PriceHourly: ptrTo(0.1167)}}},
		{"cpu only", "- name: S\n  cpu: 9\n",
			[]Override{{Name: "S", CPU: ptrTo(int64(9))}}},
		{"memoryKi only", "- name: S\n  memoryKi: 12000000\n",
			[]Override{{Name: "S", MemoryKi: ptrTo(int64(12000000))}}},
		{"nominalGB only", "- name: S\n  nominalGB: 13\n",
			[]Override{{Name: "S", NominalGB: ptrTo(int64(13))}}},
		{"name only", "- name: XL\n", []Override{{Name: "XL"}}},
		{"zero price is allowed", "- name: M\n  priceHourly: 0\n", []Override{{Name: "M", PriceHourly: ptrTo(0.0)}}},
		{"README example", "- name: M\n  priceHourly: 0.1167\n- name: CUSTOM\n  cpu: 2\n  memoryKi: 2097152\n  priceHourly: 0.01\n",
			[]Override{
				{Name: "M", PriceHourly: ptrTo(0.1167)},
				{Name: "CUSTOM", CPU: ptrTo(int64(2)), MemoryKi: ptrTo(int64(2097152)), PriceHourly: ptrTo(0.01)},
			}},
		{"JSON", `[{"name":"2XS","cpu":4,"memoryKi":3911884,"nominalGB":4,"priceHourly":0.0333}]`,
			[]Override{{Name: "2XS", CPU: ptrTo(int64(4)), MemoryKi: ptrTo(int64(3911884)), NominalGB: ptrTo(int64(4)), PriceHourly: ptrTo(0.0333)}}},
		{"names with digits, dash and underscore", "- name: GPU_1-X\n", []Override{{Name: "GPU_1-X"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseOverrides([]byte(tc.doc))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestParseOverridesRejectsEachBadEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want []string // every substring must appear in the error
	}{
		{"unknown field", "- name: M\n  price: 0.1\n", []string{`unknown field "price"`}},
		{"unknown field in second entry", "- name: M\n- name: S\n  memory: 3\n", []string{`unknown field "memory"`}},
		{"not a list", "name: M\n", []string{"decoding"}},
		{"cpu not a number", "- name: M\n  cpu: four\n", []string{"decoding"}},
		{"fractional cpu", "- name: M\n  cpu: 1.5\n", []string{"decoding"}},
		{"missing name", "- cpu: 4\n", []string{"[0].name: required"}},
		{"empty name", "- name: \"\"\n", []string{"[0].name: required"}},
		{"empty name second entry", "- name: M\n- name: \"\"\n", []string{"[1].name: required"}},
		{"lowercase name", "- name: m\n", []string{`[0].name: "m"`, "uppercase"}},
		{"mixed-case name", "- name: Xl\n", []string{`[0].name: "Xl"`}},
		{"name with a leading dash", "- name: -M\n", []string{`[0].name: "-M"`}},
		{"name with a space", "- name: \"M L\"\n", []string{`[0].name: "M L"`}},
		{"name too long", "- name: " + longName(64) + "\n", []string{"[0].name:"}},
		{"duplicate", "- name: M\n  cpu: 1\n- name: S\n- name: M\n  cpu: 2\n", []string{`[2].name: "M" duplicates [0]`}},
		{"zero cpu", "- name: M\n  cpu: 0\n", []string{"[0] M.cpu: must be positive, got 0"}},
		{"negative cpu", "- name: M\n  cpu: -2\n", []string{"[0] M.cpu: must be positive, got -2"}},
		{"zero memoryKi", "- name: S\n- name: M\n  memoryKi: 0\n", []string{"[1] M.memoryKi: must be positive, got 0"}},
		{"negative memoryKi", "- name: M\n  memoryKi: -1\n", []string{"[0] M.memoryKi"}},
		{"zero nominalGB", "- name: M\n  nominalGB: 0\n", []string{"[0] M.nominalGB: must be positive, got 0"}},
		{"negative nominalGB", "- name: M\n  nominalGB: -16\n", []string{"[0] M.nominalGB"}},
		{"negative price", "- name: M\n  priceHourly: -0.1\n", []string{"[0] M.priceHourly: must not be negative, got -0.1"}},
		// YAML's .nan and .inf cannot even be converted to JSON: rejected while decoding.
		{"NaN price", "- name: M\n  priceHourly: .nan\n", []string{"decoding", "NaN"}},
		{"infinite price", "- name: M\n  priceHourly: .inf\n", []string{"decoding", "Inf"}},
		{"every error at once", "- name: M\n  cpu: 0\n  memoryKi: -1\n  nominalGB: 0\n  priceHourly: -1\n- name: \"\"\n- name: m\n- name: M\n",
			[]string{"[0] M.cpu", "[0] M.memoryKi", "[0] M.nominalGB", "[0] M.priceHourly", "[1].name: required", `[2].name: "m"`, `[3].name: "M" duplicates [0]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseOverrides([]byte(tc.doc))
			g.Expect(err).To(HaveOccurred())
			g.Expect(got).To(BeNil(), "a rejected file yields no overrides at all")
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

func longName(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'A'
	}
	return string(b)
}

func TestParseOverridesAcceptsAMaximalName(t *testing.T) {
	g := NewWithT(t)
	ovs, err := ParseOverrides([]byte("- name: " + longName(63) + "\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ovs).To(HaveLen(1))
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "flavors.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadOverrides(t *testing.T) {
	g := NewWithT(t)

	ovs, err := LoadOverrides("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ovs).To(BeNil())

	ovs, err = LoadOverrides(writeFile(t, "- name: M\n  priceHourly: 0.2\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ovs).To(Equal([]Override{{Name: "M", PriceHourly: ptrTo(0.2)}}))

	missing := filepath.Join(t.TempDir(), "absent.yaml")
	_, err = LoadOverrides(missing)
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring(missing))

	bad := writeFile(t, "- name: M\n  cpu: 0\n")
	_, err = LoadOverrides(bad)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring(bad))
	g.Expect(err.Error()).To(ContainSubstring("M.cpu"))
}

// Load and the OverridesValid gauge are process-global: these subtests run in order and each
// first moves the gauge to the opposite value, so a Load that forgot to set it fails.
func TestLoadFallsBackToTheBaseCatalog(t *testing.T) {
	good := "- name: M\n  priceHourly: 0.5\n"
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"missing file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope.yaml") }},
		{"directory", func(t *testing.T) string { return t.TempDir() }},
		{"not YAML", func(t *testing.T) string { return writeFile(t, "{{{{ not yaml") }},
		{"unknown field", func(t *testing.T) string { return writeFile(t, "- name: M\n  prise: 1\n") }},
		{"lowercase name", func(t *testing.T) string { return writeFile(t, "- name: m\n  priceHourly: 1\n") }},
		{"negative price", func(t *testing.T) string { return writeFile(t, "- name: M\n  priceHourly: -1\n") }},
		// Parses, but New refuses it: a new flavor without a price.
		{"incomplete new flavor", func(t *testing.T) string {
			return writeFile(t, "- name: M\n  priceHourly: 0.5\n- name: NEW\n  cpu: 2\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			// Prime the gauge at 1 with a good file.
			c, err := Load(writeFile(t, good), "par", logr.Discard())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gaugeValue(OverridesValid)).To(Equal(1.0))
			g.Expect(mustGet(t, c, "M").Offerings[0].Price).To(Equal(0.5))

			c, err = Load(tc.path(t), "par", logr.Discard())
			g.Expect(err).NotTo(HaveOccurred(), "a bad overrides file must never stop the controller")
			g.Expect(c).NotTo(BeNil())
			g.Expect(gaugeValue(OverridesValid)).To(Equal(0.0))
			g.Expect(c.region).To(Equal("par"))
			// The base catalogue, unchanged: no part of the bad file was applied.
			g.Expect(c.Flavors()).To(Equal(mustBase(t).Flavors))
			g.Expect(mustGet(t, c, "M").Offerings[0].Price).To(Equal(0.1167))
		})
	}
}

func TestLoadWithoutOverrides(t *testing.T) {
	g := NewWithT(t)
	OverridesValid.Set(0)
	c, err := Load("", "par", logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gaugeValue(OverridesValid)).To(Equal(1.0))
	g.Expect(c.Flavors()).To(Equal(mustBase(t).Flavors))
}

func TestLoadAppliesAGoodFile(t *testing.T) {
	g := NewWithT(t)
	OverridesValid.Set(0)
	c, err := Load(writeFile(t, "- name: S\n  cpu: 7\n- name: CUSTOM\n  cpu: 2\n  memoryKi: 2097152\n  priceHourly: 0.01\n"), "par", logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gaugeValue(OverridesValid)).To(Equal(1.0))
	g.Expect(c.InstanceTypes()).To(HaveLen(7))
	g.Expect(mustGet(t, c, "S").Capacity.Cpu().Value()).To(Equal(int64(7)))
	g.Expect(mustGet(t, c, "CUSTOM").Offerings[0].Price).To(Equal(0.01))
}

func TestFlavorPriceMetricFollowsTheCatalog(t *testing.T) {
	g := NewWithT(t)
	c := mustNew(t, "par", []Override{{Name: "METRICX", CPU: ptrTo(int64(1)), MemoryKi: ptrTo(int64(1 << 20)), PriceHourly: ptrTo(0.0042)}})
	g.Expect(gaugeValue(flavorPrice.WithLabelValues("METRICX"))).To(Equal(0.0042))
	g.Expect(c.SetLive(Rates{VCPUHourly: 0.01, RAMGBHourly: 0.001}, nil)).To(Succeed())
	g.Expect(gaugeValue(flavorPrice.WithLabelValues("METRICX"))).To(Equal(0.0042), "override wins")
	g.Expect(math.Abs(gaugeValue(flavorPrice.WithLabelValues("XL")) - 0.192)).To(BeNumerically("<", 1e-12))
}

// gaugeValue reads a gauge as prometheus/testutil.ToFloat64 does. testutil itself is not
// used: it pulls github.com/kylelemons/godebug, which go.mod does not require.
func gaugeValue(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 2)
	c.Collect(ch)
	close(ch)
	var out []float64
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			panic(err)
		}
		out = append(out, pb.GetGauge().GetValue())
	}
	if len(out) != 1 {
		panic(fmt.Sprintf("collected %d metrics, want 1", len(out)))
	}
	return out[0]
}
