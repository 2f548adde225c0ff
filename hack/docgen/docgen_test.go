package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
)

const module = "github.com/CleverCloud/karpenter-provider-clever-cloud"

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

// The committed pages are what the code says now: make test fails on a stale page as make
// verify does.
func TestPagesAreFresh(t *testing.T) {
	root := repoRoot(t)
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(root, Dir, name))
		if err != nil {
			t.Fatalf("%s/%s: %v (run make generate)", Dir, name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s is stale: run make generate and commit", Dir, name)
		}
	}
}

// Every package that registers a metric is linked into docgen, so that its metrics are on the
// page; and every registration goes through metrics.MustRegister, which remembers it.
func TestEveryRegisteringPackageIsLinked(t *testing.T) {
	root := repoRoot(t)
	registers := map[string]bool{}
	direct := regexp.MustCompile(`\bRegistry\.(Must)?Register\(`)
	err := filepath.WalkDir(filepath.Join(root, "controller"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		if bytes.Contains(src, []byte("metrics.MustRegister(")) {
			registers[module+"/"+filepath.ToSlash(rel)] = true
		}
		if direct.Match(src) && filepath.ToSlash(rel) != "controller/metrics" {
			t.Errorf("%s registers on a registry directly: use metrics.MustRegister so the reference lists it", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(registers) == 0 {
		t.Fatal("no package registers metrics: the scan is broken")
	}
	cmd := exec.Command("go", "list", "-deps", ".")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for pkg := range registers {
		if !slices.Contains(deps, pkg) {
			t.Errorf("%s registers metrics but docgen does not link it: import it in hack/docgen/metrics.go", pkg)
		}
	}
}

func TestMetrics(t *testing.T) {
	ms, err := Metrics()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Metric{}
	for _, m := range ms {
		byName[m.Name] = m
		if !strings.HasPrefix(m.Name, "karpenter_clevercloud_") {
			t.Errorf("%s: not in the provider's namespace", m.Name)
		}
		if m.Help == "" || m.Type == "" {
			t.Errorf("%s: help %q, type %q", m.Name, m.Help, m.Type)
		}
	}
	for name, want := range map[string]Metric{
		"karpenter_clevercloud_nodegroup_launches_total":              {Type: "counter", Labels: []string{"flavor", "outcome"}},
		"karpenter_clevercloud_nodegroup_launches_given_up_total":     {Type: "counter", Labels: []string{"rule", "reason"}},
		"karpenter_clevercloud_quota_limit":                           {Type: "gauge", Labels: []string{"resource"}},
		"karpenter_clevercloud_catalog_overrides_valid":               {Type: "gauge", Labels: []string{}},
		"karpenter_clevercloud_nodegroup_acceptance_duration_seconds": {Type: "histogram", Labels: []string{"outcome"}},
	} {
		got, ok := byName[name]
		if !ok {
			t.Errorf("%s is not described", name)
			continue
		}
		if got.Type != want.Type || !slices.Equal(got.Labels, want.Labels) {
			t.Errorf("%s: type %s labels %q, want %s %q", name, got.Type, got.Labels, want.Type, want.Labels)
		}
	}
	if b := byName["karpenter_clevercloud_nodegroup_acceptance_duration_seconds"].Buckets; len(b) == 0 || b[0] != 0.25 {
		t.Errorf("acceptance histogram buckets %v, want them from 0.25", b)
	}
	// Describing leaves no placeholder series behind: the quota gauges keep their own.
	again, err := Metrics()
	if err != nil || !slices.EqualFunc(ms, again, func(a, b Metric) bool { return a.Name == b.Name && slices.Equal(a.Labels, b.Labels) }) {
		t.Errorf("a second description differs: %v", err)
	}
}

func TestCoreOptions(t *testing.T) {
	// The shell's variables must not become the documented defaults.
	t.Setenv("LOG_LEVEL", "debug")
	t.Setenv("ENABLE_PROFILING", "true")
	opts, err := CoreOptions()
	if err != nil {
		t.Fatal(err)
	}
	byFlag := map[string]CoreOption{}
	for _, o := range opts {
		byFlag[o.Flag] = o
	}
	for flag, want := range map[string]CoreOption{
		"metrics-port":              {Env: "METRICS_PORT", Default: "8080"},
		"log-level":                 {Env: "LOG_LEVEL", Default: "info"},
		"enable-profiling":          {Env: "ENABLE_PROFILING", Default: "false"},
		"disable-controller-warmup": {Env: "DISABLE_CONTROLLER_WARMUP", Default: "true"},
		"batch-max-duration":        {Env: "BATCH_MAX_DURATION", Default: "10s"},
		"karpenter-service":         {Env: "KARPENTER_SERVICE", Default: ""},
	} {
		got := byFlag[flag]
		if got.Env != want.Env || got.Default != want.Default {
			t.Errorf("--%s: variable %q default %q, want %q %q", flag, got.Env, got.Default, want.Env, want.Default)
		}
	}
	if v, _ := os.LookupEnv("LOG_LEVEL"); v != "debug" {
		t.Errorf("LOG_LEVEL is %q after CoreOptions, want the shell's debug back", v)
	}
	// Every variable the provider validates and core also reads is found as core's.
	for _, f := range []string{"METRICS_PORT", "HEALTH_PROBE_PORT", "LOG_LEVEL", "FEATURE_GATES", "BATCH_IDLE_DURATION", "DISABLE_LEADER_ELECTION"} {
		found := false
		for _, o := range opts {
			found = found || o.Env == f
		}
		if !found {
			t.Errorf("%s is not found among core's variables", f)
		}
	}
}

func TestSettings(t *testing.T) {
	ss, err := Settings(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	settings.Walk(func(settings.Field) { n++ }, &settings.Settings{})
	if len(ss) != n {
		t.Fatalf("%d settings described, %d in the struct", len(ss), n)
	}
	for _, s := range ss {
		if s.Doc == "" || s.Rule == "" || s.Kind == "" {
			t.Errorf("%s: doc %q, rule %q, kind %q", s.Env, s.Doc, s.Rule, s.Kind)
		}
	}
	get := func(env string) Setting {
		for _, s := range ss {
			if s.Env == env {
				return s
			}
		}
		t.Fatalf("%s not described", env)
		return Setting{}
	}
	if s := get("METRICS_PORT"); s.Key != "settings.metricsPort" || s.Kind != "integer" || s.Rule != "an integer from 1 to 65535" {
		t.Errorf("METRICS_PORT: %+v", s)
	}
	if s := get("NODEGROUP_LAUNCH_GIVE_UP_AFTER"); !strings.Contains(s.Rule, "below `15m`") || s.Key != "settings.launchGiveUpAfter" {
		t.Errorf("NODEGROUP_LAUNCH_GIVE_UP_AFTER: %+v", s)
	}
	if s := get("FLAVORS_CONFIG_PATH"); s.Key != "" {
		t.Errorf("FLAVORS_CONFIG_PATH has values key %q; the values do not carry it", s.Key)
	}
	// Go field names in the docs read as the variables a user sets.
	if s := get("NODEGROUP_STOPPED_LAUNCH_GIVE_UP_AFTER"); !strings.Contains(s.Doc, "`NODEGROUP_LAUNCH_GIVE_UP_AFTER`") {
		t.Errorf("the stopped give-up doc does not name NODEGROUP_LAUNCH_GIVE_UP_AFTER: %s", s.Doc)
	}
}

func TestBundleEnv(t *testing.T) {
	env, err := BundleEnv(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]EnvVar{}
	for _, e := range env {
		got[e.Name] = e
	}
	if got["PRICING_REFRESH_ENABLED"].Value != "true" {
		t.Errorf("the bundle's PRICING_REFRESH_ENABLED is %q, want true", got["PRICING_REFRESH_ENABLED"].Value)
	}
	if got["MEMORY_LIMIT"].From == "" {
		t.Error("MEMORY_LIMIT is not read as a valueFrom")
	}
}

// The README's "What is tested" table says what the go.mod files pin.
func TestREADMECompatibility(t *testing.T) {
	root := repoRoot(t)
	c, err := Compatibility(root)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| Kubernetes (the simulated CKE every test runs on) | " + Minor(c.Kubernetes) + " (" + c.Kubernetes + ") |",
		"| Karpenter core | " + c.Core + " |",
	} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md does not say %q: update its What is tested table", want)
		}
	}
}
