package settings

import (
	"os"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
)

func TestEveryRuleParses(t *testing.T) {
	Walk(func(f Field) {
		f.Rule() // panics on a tag that does not parse or does not fit the type
		if err := f.set(f.Default); err != nil {
			t.Errorf("%s: its default %q breaks its own rule: %v", f.Path, f.Default, err)
		}
	}, &Settings{})
}

func refusedValue(t *testing.T, path, env string) float64 {
	t.Helper()
	var m dto.Metric
	if err := refusedGauge.WithLabelValues(path, env).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestLoadRunsARefusedSettingOnItsDefault: a bad value in an edited Deployment must not
// crash-loop the autoscaler. The setting runs on its default, which is written back for
// Karpenter core to read, and the refusal is published.
func TestLoadRunsARefusedSettingOnItsDefault(t *testing.T) {
	g := NewWithT(t)
	clearEnv(t)
	t.Setenv("NODEGROUP_LAUNCH_GIVE_UP_AFTER", "20m")
	t.Setenv("LOG_LEVEL", "trace") // core exits on a LOG_LEVEL it does not know
	t.Setenv("METRICS_PORT", "9090")
	s, err := Load()
	g.Expect(err).NotTo(HaveOccurred())
	d := Defaults()
	g.Expect(s.LaunchGiveUpAfter).To(Equal(d.LaunchGiveUpAfter))
	g.Expect(s.LogLevel).To(Equal("info"))
	g.Expect(s.MetricsPort).To(Equal(9090), "a good setting beside them keeps its value")
	g.Expect(os.Getenv("LOG_LEVEL")).To(Equal("info"))
	g.Expect(os.Getenv("NODEGROUP_LAUNCH_GIVE_UP_AFTER")).To(Equal(defaultOf(t, "NODEGROUP_LAUNCH_GIVE_UP_AFTER")))
	g.Expect(refusedValue(t, "launchGiveUpAfter", "NODEGROUP_LAUNCH_GIVE_UP_AFTER")).To(Equal(1.0))
	g.Expect(refusedValue(t, "logLevel", "LOG_LEVEL")).To(Equal(1.0))
	g.Expect(refusedValue(t, "metricsPort", "METRICS_PORT")).To(Equal(0.0))

	// The next start with good values clears what the last one reported.
	clearEnv(t)
	_, err = Load()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refusedValue(t, "logLevel", "LOG_LEVEL")).To(Equal(0.0))
}

func defaultOf(t *testing.T, env string) string {
	t.Helper()
	def, found := "", false
	Walk(func(f Field) {
		if f.Env == env {
			def, found = f.Default, true
		}
	}, &Settings{})
	if !found {
		t.Fatalf("no setting reads %s", env)
	}
	return def
}

// TestARefusedRegionStopsTheController: no default knows where the cluster is.
func TestARefusedRegionStopsTheController(t *testing.T) {
	g := NewWithT(t)
	clearEnv(t)
	t.Setenv("CLEVER_CLOUD_REGION", "PAR")
	t.Setenv("LOG_LEVEL", "trace")
	_, err := Load()
	g.Expect(err).To(MatchError(ContainSubstring(`CLEVER_CLOUD_REGION="PAR": must match`)))
	g.Expect(err.Error()).NotTo(ContainSubstring("LOG_LEVEL"), "a setting with a safe default is not fatal")
}

// TestLenientRefusesWhatLoadFromRefuses: the controller's start and the strict check (which
// the bundle's tests run on rendered environments) apply the same rules.
func TestLenientRefusesWhatLoadFromRefuses(t *testing.T) {
	for _, kv := range [][2]string{
		{"METRICS_PORT", "0"}, {"METRICS_PORT", "x"}, {"DISABLE_LEADER_ELECTION", "maybe"},
		{"BATCH_MAX_DURATION", "0s"}, {"NODEGROUP_ACCEPTANCE_TIMEOUT", "0s"},
		{"NODEGROUP_STOPPED_LAUNCH_GIVE_UP_AFTER", "15m"}, {"PRICING_API_URL", "ftp://x"},
		{"FEATURE_GATES", "A=B"}, {"CLEVER_CLOUD_QUOTA_CPU", "-1"},
	} {
		t.Run(kv[0]+"="+kv[1], func(t *testing.T) {
			g := NewWithT(t)
			_, strictErr := LoadFrom(env(kv[0], kv[1]))
			g.Expect(strictErr).To(HaveOccurred())
			s, refused, err := Lenient(env(kv[0], kv[1]))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(refused).To(HaveLen(1))
			g.Expect(refused[0].Env).To(Equal(kv[0]))
			g.Expect(strictErr.Error()).To(ContainSubstring(refused[0].Err.Error()))
			g.Expect(s).To(Equal(Defaults()))
		})
	}
}

// FuzzURLPatternIsAccepted: a URL the values schema's pattern accepts, the controller accepts,
// so a URL that renders never stops the controller.
func FuzzURLPatternIsAccepted(f *testing.F) {
	for _, s := range []string{
		"https://api.clever-cloud.com", "http://proxy.internal:8080/clever/", "http://a/%41?q=1#f", "http://a/[", "http://a:1/%zz",
		"http://a/\\x", "http://1.2.3.4:99999", "https://a..b/?#", "http://a/#x#y", "http://-/",
	} {
		f.Add(s)
	}
	re := regexp.MustCompile(URLPattern)
	r := Rule{Kind: KindString, URL: true}
	f.Fuzz(func(t *testing.T, s string) {
		if re.MatchString(s) {
			if err := r.checkString(s); err != nil {
				t.Errorf("%q matches URLPattern but the controller refuses it: %v", s, err)
			}
		}
	})
}
