package settings

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// everyEnv is every variable the product description lists, plus NODEGROUP_ACCEPTANCE_TIMEOUT.
// Settings added later are checked through allEnv (Walk) and the struct tags.
var everyEnv = []string{
	"CLEVER_CLOUD_REGION",
	"CLEVER_CLOUD_TOPOLOGY",
	"LOG_LEVEL",
	"METRICS_PORT",
	"HEALTH_PROBE_PORT",
	"DISABLE_LEADER_ELECTION",
	"BATCH_MAX_DURATION",
	"BATCH_IDLE_DURATION",
	"COST_STEERING",
	"COST_REPLACEMENT_ENABLED",
	"COST_REPLACEMENT_MIN_NODE_AGE",
	"FEATURE_GATES",
	"FLAVORS_CONFIG_PATH",
	"NODEGROUP_ACCEPTANCE_TIMEOUT",
	"PRICING_REFRESH_ENABLED",
	"PRICING_REFRESH_PERIOD",
	"PRICING_API_URL",
	"PRICING_PRODUCT_URL",
	"PRICING_PRICE_SYSTEM_URL",
}

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func dur(d time.Duration) Duration { return Duration{d} }

func TestDefaultsAreTheDocumentedOnes(t *testing.T) {
	g := NewWithT(t)
	d := Defaults()
	g.Expect(d).To(Equal(Settings{
		Region:                   "par",
		Topology:                 "",
		LogLevel:                 "info",
		MetricsPort:              8080,
		HealthProbePort:          8081,
		DisableLeaderElection:    false,
		BatchMaxDuration:         dur(10 * time.Second),
		BatchIdleDuration:        dur(time.Second),
		CostSteering:             true,
		CostReplacement:          CostReplacement{Enabled: true, MinNodeAge: dur(time.Hour)},
		FeatureGates:             "NodeRepair=false",
		FlavorsConfigPath:        "",
		AcceptanceTimeout:        dur(10 * time.Second),
		SyncOverdueAfter:         dur(10 * time.Minute),
		LaunchGiveUpAfter:        dur(3*time.Minute + 30*time.Second),
		StoppedLaunchGiveUpAfter: dur(3*time.Minute + 10*time.Second),
		Pricing: Pricing{
			Enabled:              false,
			RefreshPeriod:        dur(12 * time.Hour),
			APIURL:               "https://api.clever-cloud.com",
			KubernetesProductURL: "",
			PriceSystemURL:       "",
		},
	}))
	g.Expect(d.Pricing.ProductURL()).To(Equal("https://api.clever-cloud.com/v4/kubernetes-product"))
	g.Expect(d.Pricing.PriceSystemEndpoint()).To(Equal("https://api.clever-cloud.com/v4/billing/price-system"))

	// An empty environment, through every entry point, gives the defaults.
	s, err := LoadFrom(env())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(Equal(d))
	clearEnv(t)
	s, err = Load()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(Equal(d))
}

// clearEnv unsets every variable the settings read, for Load; t.Setenv restores them.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, e := range allEnv() {
		t.Setenv(e, "") // registers restoration of the real environment
		if err := os.Unsetenv(e); err != nil {
			t.Fatal(err)
		}
	}
}

// allEnv is every variable Walk knows, documented or not.
func allEnv() []string {
	var s Settings
	var out []string
	Walk(func(f Field) { out = append(out, f.Env) }, &s)
	return out
}

func TestLoadReadsTheProcessEnvironment(t *testing.T) {
	g := NewWithT(t)
	clearEnv(t)
	t.Setenv("METRICS_PORT", "9090")
	t.Setenv("PRICING_REFRESH_ENABLED", "true")
	s, err := Load()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.MetricsPort).To(Equal(9090))
	g.Expect(s.Pricing.Enabled).To(BeTrue())

	// A refused value gives way to its default (TestLoadRunsARefusedSettingOnItsDefault).
	t.Setenv("METRICS_PORT", "nope")
	s, err = Load()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.MetricsPort).To(Equal(8080))
	g.Expect(s.Pricing.Enabled).To(BeTrue())
}

func TestEveryValueIsRead(t *testing.T) {
	g := NewWithT(t)
	s, err := LoadFrom(env(
		"CLEVER_CLOUD_REGION", "rbx",
		"CLEVER_CLOUD_TOPOLOGY", "DEDICATED_COMPUTE",
		"LOG_LEVEL", "debug",
		"METRICS_PORT", "1",
		"HEALTH_PROBE_PORT", "65535",
		"DISABLE_LEADER_ELECTION", "true",
		"BATCH_MAX_DURATION", "1m30s",
		"BATCH_IDLE_DURATION", "250ms",
		"COST_STEERING", "false",
		"COST_REPLACEMENT_ENABLED", "false",
		"COST_REPLACEMENT_MIN_NODE_AGE", "2h30m",
		"FEATURE_GATES", "NodeRepair=true,SpotToSpotConsolidation=false",
		"FLAVORS_CONFIG_PATH", "/etc/karpenter/flavors/flavors.yaml",
		"NODEGROUP_ACCEPTANCE_TIMEOUT", "2m",
		"NODEGROUP_LAUNCH_GIVE_UP_AFTER", "14m59s",
		"NODEGROUP_STOPPED_LAUNCH_GIVE_UP_AFTER", "90s",
		"PRICING_REFRESH_ENABLED", "true",
		"PRICING_REFRESH_PERIOD", "30m",
		"PRICING_API_URL", "http://proxy.internal:8080/clever/",
		"PRICING_PRODUCT_URL", "https://products.example/k8s",
		"PRICING_PRICE_SYSTEM_URL", "https://prices.example/ps",
	))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(Equal(Settings{
		Region:                   "rbx",
		Topology:                 "DEDICATED_COMPUTE",
		LogLevel:                 "debug",
		MetricsPort:              1,
		HealthProbePort:          65535,
		DisableLeaderElection:    true,
		BatchMaxDuration:         dur(90 * time.Second),
		BatchIdleDuration:        dur(250 * time.Millisecond),
		CostSteering:             false,
		CostReplacement:          CostReplacement{Enabled: false, MinNodeAge: dur(150 * time.Minute)},
		FeatureGates:             "NodeRepair=true,SpotToSpotConsolidation=false",
		FlavorsConfigPath:        "/etc/karpenter/flavors/flavors.yaml",
		AcceptanceTimeout:        dur(2 * time.Minute),
		SyncOverdueAfter:         dur(10 * time.Minute),
		LaunchGiveUpAfter:        dur(14*time.Minute + 59*time.Second),
		StoppedLaunchGiveUpAfter: dur(90 * time.Second),
		Pricing: Pricing{
			Enabled:              true,
			RefreshPeriod:        dur(30 * time.Minute),
			APIURL:               "http://proxy.internal:8080/clever/",
			KubernetesProductURL: "https://products.example/k8s",
			PriceSystemURL:       "https://prices.example/ps",
		},
	}))
}

func TestValuesAreTrimmed(t *testing.T) {
	g := NewWithT(t)
	s, err := LoadFrom(env("METRICS_PORT", " 9000\n", "LOG_LEVEL", "\terror ", "DISABLE_LEADER_ELECTION", " true"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.MetricsPort).To(Equal(9000))
	g.Expect(s.LogLevel).To(Equal("error"))
	g.Expect(s.DisableLeaderElection).To(BeTrue())
}

func TestAcceptedSpellings(t *testing.T) {
	for _, tc := range []struct {
		env, value string
		check      func(Settings) bool
	}{
		{"DISABLE_LEADER_ELECTION", "false", func(s Settings) bool { return !s.DisableLeaderElection }},
		{"DISABLE_LEADER_ELECTION", "TRUE", func(s Settings) bool { return s.DisableLeaderElection }},
		{"DISABLE_LEADER_ELECTION", "1", func(s Settings) bool { return s.DisableLeaderElection }},
		{"LOG_LEVEL", "error", func(s Settings) bool { return s.LogLevel == "error" }},
		{"CLEVER_CLOUD_TOPOLOGY", "ALL_IN_ONE", func(s Settings) bool { return s.Topology == "ALL_IN_ONE" }},
		{"CLEVER_CLOUD_TOPOLOGY", "DISTRIBUTED", func(s Settings) bool { return s.Topology == "DISTRIBUTED" }},
		{"CLEVER_CLOUD_TOPOLOGY", "", func(s Settings) bool { return s.Topology == "" }},
		{"FEATURE_GATES", "", func(s Settings) bool { return s.FeatureGates == "" }},
		{"FEATURE_GATES", "A=true", func(s Settings) bool { return s.FeatureGates == "A=true" }},
		{"CLEVER_CLOUD_REGION", "par-2", func(s Settings) bool { return s.Region == "par-2" }},
		{"PRICING_PRODUCT_URL", "", func(s Settings) bool { return s.Pricing.KubernetesProductURL == "" }},
		{"PRICING_REFRESH_PERIOD", "1ns", func(s Settings) bool { return s.Pricing.RefreshPeriod.Duration == time.Nanosecond }},
		{"NODEGROUP_LAUNCH_GIVE_UP_AFTER", "899999ms", func(s Settings) bool { return s.LaunchGiveUpAfter.Duration == 899999*time.Millisecond }},
		{"NODEGROUP_STOPPED_LAUNCH_GIVE_UP_AFTER", "1s", func(s Settings) bool { return s.StoppedLaunchGiveUpAfter.Duration == time.Second }},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			g := NewWithT(t)
			s, err := LoadFrom(env(tc.env, tc.value))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tc.check(s)).To(BeTrue(), "%+v", s)
		})
	}
}

func TestEachBadValueNamesItsVariable(t *testing.T) {
	for _, tc := range []struct {
		env, value string
		why        string // a substring of the explanation
	}{
		{"METRICS_PORT", "http", "not an integer"},
		{"METRICS_PORT", "80.5", "not an integer"},
		{"METRICS_PORT", "", "not an integer"},
		{"METRICS_PORT", "0", "below the minimum 1"},
		{"METRICS_PORT", "-1", "below the minimum 1"},
		{"METRICS_PORT", "70000", "above the maximum 65535"},
		{"METRICS_PORT", "65536", "above the maximum 65535"},
		{"HEALTH_PROBE_PORT", "0", "below the minimum"},
		{"HEALTH_PROBE_PORT", "70000", "above the maximum"},
		{"HEALTH_PROBE_PORT", "eighty", "not an integer"},
		{"DISABLE_LEADER_ELECTION", "yes", "not a boolean"},
		{"DISABLE_LEADER_ELECTION", "", "not a boolean"},
		{"PRICING_REFRESH_ENABLED", "on", "not a boolean"},
		{"BATCH_MAX_DURATION", "10", "not a duration"},
		{"BATCH_MAX_DURATION", "ten seconds", "not a duration"},
		{"BATCH_MAX_DURATION", "-10s", "must be positive"},
		{"BATCH_MAX_DURATION", "0s", "must be positive"},
		{"BATCH_IDLE_DURATION", "1d", "not a duration"},
		{"BATCH_IDLE_DURATION", "-1s", "must be positive"},
		{"PRICING_REFRESH_PERIOD", "-12h", "must be positive"},
		{"PRICING_REFRESH_PERIOD", "12", "not a duration"},
		{"NODEGROUP_ACCEPTANCE_TIMEOUT", "0", "must be positive"},
		// Past core's 15-minute registration timeout a give-up time would never act.
		{"NODEGROUP_LAUNCH_GIVE_UP_AFTER", "15m", "must be below 15m"},
		{"NODEGROUP_LAUNCH_GIVE_UP_AFTER", "1h", "must be below 15m"},
		{"NODEGROUP_LAUNCH_GIVE_UP_AFTER", "0s", "must be positive"},
		{"NODEGROUP_LAUNCH_GIVE_UP_AFTER", "8", "not a duration"},
		{"NODEGROUP_STOPPED_LAUNCH_GIVE_UP_AFTER", "900s", "must be below 15m"},
		{"NODEGROUP_STOPPED_LAUNCH_GIVE_UP_AFTER", "-4m", "must be positive"},
		{"LOG_LEVEL", "warn", "must be one of debug, info, error"},
		{"LOG_LEVEL", "INFO", "must be one of"},
		{"LOG_LEVEL", "", "must be one of"},
		{"CLEVER_CLOUD_REGION", "PAR", "must match"},
		{"CLEVER_CLOUD_REGION", "", "must match"},
		{"CLEVER_CLOUD_REGION", "par 1", "must match"},
		{"PRICING_API_URL", "api.clever-cloud.com", "absolute http(s) URL"},
		{"PRICING_API_URL", "ftp://api.clever-cloud.com", "absolute http(s) URL"},
		{"PRICING_API_URL", "https://", "absolute http(s) URL"},
		{"PRICING_API_URL", "http://[::1", "absolute http(s) URL"},
		{"PRICING_PRODUCT_URL", "/v4/kubernetes-product", "absolute http(s) URL"},
		{"PRICING_PRICE_SYSTEM_URL", "mailto:x@example.com", "absolute http(s) URL"},
		{"CLEVER_CLOUD_TOPOLOGY", "distributed", "must match"},
		{"CLEVER_CLOUD_TOPOLOGY", "ALL-IN-ONE", "must match"},
		{"CLEVER_CLOUD_TOPOLOGY", "1TOPOLOGY", "must match"},
		{"FEATURE_GATES", "NodeRepair", "must match"},
		{"FEATURE_GATES", "NodeRepair=yes", "must match"},
		{"FEATURE_GATES", "NodeRepair=true,", "must match"},
		{"FEATURE_GATES", "NodeRepair=true;Other=false", "must match"},
		{"FEATURE_GATES", "Node-Repair=true", "must match"},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			g := NewWithT(t)
			_, err := LoadFrom(env(tc.env, tc.value))
			g.Expect(err).To(HaveOccurred())
			msg := err.Error()
			g.Expect(msg).To(HavePrefix(tc.env+"="), "the error starts with the variable")
			g.Expect(msg).To(ContainSubstring(tc.why))
			// Only the bad variable is reported.
			for _, other := range allEnv() {
				if other != tc.env {
					g.Expect(msg).NotTo(ContainSubstring(other + "="))
				}
			}
		})
	}
}

func TestEveryBadValueIsReportedAtOnce(t *testing.T) {
	g := NewWithT(t)
	bad := env(
		"METRICS_PORT", "0",
		"HEALTH_PROBE_PORT", "x",
		"DISABLE_LEADER_ELECTION", "maybe",
		"BATCH_IDLE_DURATION", "-1s",
		"LOG_LEVEL", "trace",
		"PRICING_API_URL", "not a url",
		"CLEVER_CLOUD_TOPOLOGY", "lower",
		"FEATURE_GATES", "A=B",
		// A good one among them must not be reported.
		"BATCH_MAX_DURATION", "5s",
	)
	_, err := LoadFrom(bad)
	g.Expect(err).To(HaveOccurred())
	for _, e := range []string{"METRICS_PORT", "HEALTH_PROBE_PORT", "DISABLE_LEADER_ELECTION", "BATCH_IDLE_DURATION", "LOG_LEVEL", "PRICING_API_URL", "CLEVER_CLOUD_TOPOLOGY", "FEATURE_GATES"} {
		g.Expect(err.Error()).To(ContainSubstring(e+"="), e)
	}
	g.Expect(err.Error()).NotTo(ContainSubstring("BATCH_MAX_DURATION"))
	var joined interface{ Unwrap() []error }
	g.Expect(errors.As(err, &joined)).To(BeTrue())
	g.Expect(joined.Unwrap()).To(HaveLen(8), "one error per bad variable")
	// The raw value is quoted in the message, so an operator sees what they set.
	g.Expect(err.Error()).To(ContainSubstring(`PRICING_API_URL="not a url"`))
}

func TestEndpointDerivation(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		pricing                 Pricing
		product, priceSystemURL string
	}{
		{"default base", Pricing{APIURL: "https://api.clever-cloud.com"},
			"https://api.clever-cloud.com/v4/kubernetes-product", "https://api.clever-cloud.com/v4/billing/price-system"},
		{"trailing slash", Pricing{APIURL: "https://api.clever-cloud.com/"},
			"https://api.clever-cloud.com/v4/kubernetes-product", "https://api.clever-cloud.com/v4/billing/price-system"},
		{"base with a path", Pricing{APIURL: "http://proxy:8080/clever"},
			"http://proxy:8080/clever/v4/kubernetes-product", "http://proxy:8080/clever/v4/billing/price-system"},
		{"product overridden only", Pricing{APIURL: "https://api.clever-cloud.com", KubernetesProductURL: "https://p.example/x"},
			"https://p.example/x", "https://api.clever-cloud.com/v4/billing/price-system"},
		{"price system overridden only", Pricing{APIURL: "https://api.clever-cloud.com", PriceSystemURL: "https://q.example/y/"},
			"https://api.clever-cloud.com/v4/kubernetes-product", "https://q.example/y/"},
		{"both overridden", Pricing{APIURL: "https://unused.example", KubernetesProductURL: "https://p.example/x", PriceSystemURL: "https://q.example/y"},
			"https://p.example/x", "https://q.example/y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tc.pricing.ProductURL()).To(Equal(tc.product))
			g.Expect(tc.pricing.PriceSystemEndpoint()).To(Equal(tc.priceSystemURL))
		})
	}

	// And through the environment.
	g := NewWithT(t)
	s, err := LoadFrom(env("PRICING_API_URL", "http://localhost:9999/", "PRICING_PRICE_SYSTEM_URL", "https://billing.example/ps"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Pricing.ProductURL()).To(Equal("http://localhost:9999/v4/kubernetes-product"))
	g.Expect(s.Pricing.PriceSystemEndpoint()).To(Equal("https://billing.example/ps"))
}

func TestWalkVisitsEveryEnvFieldOnce(t *testing.T) {
	g := NewWithT(t)
	var s Settings
	var fields []Field
	Walk(func(f Field) { fields = append(fields, f) }, &s)

	var envs, paths []string
	for _, f := range fields {
		envs = append(envs, f.Env)
		paths = append(paths, f.Path)
		g.Expect(f.Env).NotTo(BeEmpty(), f.Path)
		g.Expect(f.Tag.Get("env")).To(Equal(f.Env))
		g.Expect(f.Default).To(Equal(f.Tag.Get("default")))
	}
	// Every documented variable is visited exactly once (settings added later may follow).
	for _, e := range everyEnv {
		n := 0
		for _, v := range envs {
			if v == e {
				n++
			}
		}
		g.Expect(n).To(Equal(1), "%s visited %d times", e, n)
	}
	g.Expect(slices.Compact(slices.Sorted(slices.Values(envs)))).To(HaveLen(len(envs)), "unique env names")
	g.Expect(slices.Compact(slices.Sorted(slices.Values(paths)))).To(HaveLen(len(paths)), "unique paths")

	// Cross-check against the struct's own tags, found independently by reflection.
	g.Expect(envs).To(ConsistOf(envTags(reflect.TypeFor[Settings]())))

	// Paths follow the JSON names; json:"-" falls back to the Go name; nesting uses dots.
	byEnv := map[string]string{}
	for _, f := range fields {
		byEnv[f.Env] = f.Path
	}
	g.Expect(byEnv).To(HaveKeyWithValue("CLEVER_CLOUD_REGION", "region"))
	g.Expect(byEnv).To(HaveKeyWithValue("CLEVER_CLOUD_TOPOLOGY", "topology"))
	g.Expect(byEnv).To(HaveKeyWithValue("METRICS_PORT", "metricsPort"))
	g.Expect(byEnv).To(HaveKeyWithValue("FLAVORS_CONFIG_PATH", "FlavorsConfigPath"))
	g.Expect(byEnv).To(HaveKeyWithValue("PRICING_REFRESH_ENABLED", "pricing.enabled"))
	g.Expect(byEnv).To(HaveKeyWithValue("PRICING_PRODUCT_URL", "pricing.kubernetesProductURL"))
	g.Expect(byEnv).To(HaveKeyWithValue("BATCH_MAX_DURATION", "batchMaxDuration"))

	// Declaration order, depth first (everyEnv is written in declaration order).
	documented := slices.DeleteFunc(slices.Clone(envs), func(e string) bool { return !slices.Contains(everyEnv, e) })
	g.Expect(documented).To(Equal(everyEnv))
	g.Expect(envs[0]).To(Equal("CLEVER_CLOUD_REGION"))
}

func envTags(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if e, ok := f.Tag.Lookup("env"); ok {
			out = append(out, e)
		} else if f.Type.Kind() == reflect.Struct {
			out = append(out, envTags(f.Type)...)
		}
	}
	return out
}

func TestEveryDefaultParses(t *testing.T) {
	// Each tag default, set explicitly, must be accepted and equal the implicit default.
	var s Settings
	Walk(func(f Field) {
		t.Run(f.Env, func(t *testing.T) {
			g := NewWithT(t)
			got, err := LoadFrom(env(f.Env, f.Default))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(Defaults()))
		})
	}, &s)
}

func TestDurationText(t *testing.T) {
	g := NewWithT(t)
	b, err := dur(90 * time.Second).MarshalText()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal("1m30s"))

	var d Duration
	g.Expect(d.UnmarshalText([]byte("12h"))).To(Succeed())
	g.Expect(d.Duration).To(Equal(12 * time.Hour))
	g.Expect(d.UnmarshalText([]byte("soon"))).NotTo(Succeed())
	g.Expect(d.Duration).To(Equal(12*time.Hour), "a failed unmarshal keeps the value")
}

func TestErrorQuotesTheRawValueUntrimmed(t *testing.T) {
	g := NewWithT(t)
	_, err := LoadFrom(env("LOG_LEVEL", " loud "))
	g.Expect(err).To(MatchError(HavePrefix(`LOG_LEVEL=" loud ": `)))
	g.Expect(strings.Count(err.Error(), "LOG_LEVEL")).To(Equal(1))
}
