package bundle_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
)

// cueBin is the cue command TestMain builds from tools/go.mod.
var cueBin string

// cueRun runs the cue command in dir and returns its stdout, its stderr and whether it
// exited 0. Anything but a clean run or an exit status (a binary that cannot start) fails
// the test.
func cueRun(t *testing.T, dir string, args ...string) (stdout, stderr string, ok bool) {
	t.Helper()
	cmd := exec.Command(cueBin, args...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running cue %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), err == nil
}

// wantRefused checks a failed render: non-zero exit, nothing on stdout (a shell redirect
// would otherwise leave a half-written install.yaml), and a message naming every want. The
// message must never be the builtin's wrapper without a path, as it was before values were
// checked on their own (`stream: error in call to list.Concat: field not allowed`).
func wantRefused(t *testing.T, args []string, stdout, stderr string, ok bool, want []string) {
	t.Helper()
	if ok {
		t.Fatalf("cue %s exited 0; want a refusal naming %q", strings.Join(args, " "), want)
	}
	if stdout != "" {
		t.Errorf("cue %s wrote %d bytes to stdout while failing", strings.Join(args, " "), len(stdout))
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("cue %s: the message does not mention %q:\n%s", strings.Join(args, " "), w, stderr)
		}
	}
	if strings.Contains(stderr, "list.Concat") {
		t.Errorf("cue %s: the message is the list.Concat wrapper:\n%s", strings.Join(args, " "), stderr)
	}
}

// TestCLIRefusesBadValues runs the README's own command on bad values files: each fails
// naming the field's path and the rule it breaks.
func TestCLIRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         []string
	}{
		{"unknown key", "replica: 3", []string{"values.replica", "field not allowed"}},
		{"unknown setting", "settings: {regin: par}", []string{"values.settings.regin", "field not allowed"}},
		{"string for an int setting", `settings: {metricsPort: "8080"}`, []string{"values.settings.metricsPort", "mismatched types string and int"}},
		{"string for an int knob", `replicas: "2"`, []string{"values.replicas", "mismatched types string and int"}},
		{"string for a bool", `podDisruptionBudget: {enabled: "yes"}`, []string{"values.podDisruptionBudget.enabled", "mismatched types string and bool"}},
		{"int for a string", "nodeSelector: {a: 1}", []string{"values.nodeSelector.a", "mismatched types int and string"}},
		{"port out of range", "settings: {metricsPort: 70000}", []string{"values.settings.metricsPort", "out of bound <=65535"}},
		{"negative quota", "settings: {quota: {cpu: -1}}", []string{"values.settings.quota.cpu", "out of bound >=0"}},
		{"malformed duration", "settings: {pricing: {refreshPeriod: 12 hours}}", []string{"values.settings.pricing.refreshPeriod", `invalid value "12 hours" (out of bound =~`}},
		// The controller's bounds on durations, which JSON Schema cannot state (issue 32).
		{"give-up time past core's registration timeout", "settings: {launchGiveUpAfter: 20m}", []string{"values.settings._refused.launchGiveUpAfter", `"20m": must be below 15m`}},
		{"zero acceptance timeout", "settings: {acceptanceTimeout: 0s}", []string{"values.settings._refused.acceptanceTimeout", `"0s": must be positive`}},
		{"zero batch window", "settings: {batchMaxDuration: 0s}", []string{"values.settings._refused.batchMaxDuration", `"0s": must be positive`}},
		{"duration Go cannot hold", "settings: {pricing: {refreshPeriod: 9999999999h}}", []string{"values.settings.pricing.refreshPeriod", "does not satisfy time.Duration"}},
		{"url the controller cannot parse", `settings: {pricing: {apiURL: "http://a/%zz"}}`, []string{"values.settings.pricing.apiURL", `invalid value "http://a/%zz"`}},
		{"log level", "settings: {logLevel: trace}", []string{"values.settings.logLevel", `conflicting values "info" and "trace"`}},
		{"url scheme", `settings: {pricing: {apiURL: "ftp://x"}}`, []string{"values.settings.pricing.apiURL", `invalid value "ftp://x" (out of bound =~"^(https?://`}},
		{"extraEnv shadows a setting", "extraEnv: [{name: LOG_LEVEL, value: debug}]", []string{"values.extraEnv.0.name", `!="LOG_LEVEL"`}},
		{"lowercase flavor", "settings: {flavors: [{name: m}]}", []string{"values.settings.flavors.0.name", `out of bound =~"^[A-Z0-9][A-Z0-9_-]*$"`}},
		{"negative price", "settings: {flavors: [{name: M, priceHourly: -1}]}", []string{"values.settings.flavors.0.priceHourly", "out of bound >=0"}},
		{"unknown override field", "settings: {flavors: [{name: M, price: 1}]}", []string{"values.settings.flavors.0.price", "field not allowed"}},
		{"new flavor without sizes", "settings: {flavors: [{name: NEW}]}", []string{"values.settings.flavors.0: flavor NEW is not in the base catalogue", "must give cpu, memoryKi and priceHourly; missing cpu, memoryKi, priceHourly"}},
		{"new flavor without price", "settings: {flavors: [{name: NEW, cpu: 4, memoryKi: 3715344}]}", []string{"values.settings.flavors.0: flavor NEW", "missing priceHourly"}},
		{"flavor pinned twice", "settings: {flavors: [{name: M, cpu: 3}, {name: M, priceHourly: 1}]}", []string{"values.settings.flavors.1: flavor M is pinned twice, first at values.settings.flavors.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "my-values.yaml")
			if err := os.WriteFile(file, []byte(tc.values+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"export", "./cue", "-l", "values:", file, "-e", "stream", "--out", "text"}
			stdout, stderr, ok := cueRun(t, root, args...)
			wantRefused(t, args, stdout, stderr, ok, tc.want)
		})
	}
}

// TestCLIRefusesBadTags: the tags of the README's second command, through export and both
// cue cmd commands.
func TestCLIRefusesBadTags(t *testing.T) {
	for _, tc := range []struct {
		tag  string
		want []string
	}{
		{"replicas=-1", []string{"values.replicas", "invalid value -1 (out of bound >=0)"}},
		{"replicas=two", []string{`injection tag "replicas"`, "illegal number"}},
		{"pricing=maybe", []string{`invalid boolean "maybe" for injection tag "pricing"`}},
		{"namespace=Bad_NS", []string{"values.namespace", `invalid value "Bad_NS" (out of bound =~"^[a-z0-9]`}},
		{"image=", []string{"values.image.reference", "strings.MinRunes(1)"}},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			for _, args := range [][]string{
				{"export", "./cue", "-t", tc.tag, "-e", "stream", "--out", "text"},
				{"cmd", "ls", "./cue", "-t", tc.tag},
				{"cmd", "build", "./cue", "-t", tc.tag},
			} {
				stdout, stderr, ok := cueRun(t, root, args...)
				wantRefused(t, args, stdout, stderr, ok, tc.want)
			}
		})
	}
}

// TestCLIPins edits flavors/pins.cue in a copy of the module and renders it the way users
// (`cue export ./cue -e stream`, `cue cmd build ./cue`) and `make generate` (`-e appStream`,
// into out/) do. Every pin
// the controller would refuse, dropping the whole overrides file and so every valid pin with
// it, must fail the render instead, naming the pin and the rule.
func TestCLIPins(t *testing.T) {
	for _, tc := range []struct {
		name string
		pins string // the #pins list
		want []string
	}{
		{"new flavor without sizes", `[{name: "M", priceHourly: 0.1}, {name: "NEW", cpu: 2}]`, []string{"#pins.1 in flavors/pins.cue: flavor NEW is not in the base catalogue", "missing memoryKi, priceHourly"}},
		{"unknown field", `[{name: "M", price: 0.1}]`, []string{"#pins.0 in flavors/pins.cue: price: not a field of a flavor override", "field not allowed"}},
		{"pinned twice", `[{name: "M", priceHourly: 0.1}, {name: "M", cpu: 3}]`, []string{"#pins.1 in flavors/pins.cue: flavor M is pinned twice, first at #pins.0 in flavors/pins.cue"}},
		{"negative price", `[{name: "M", priceHourly: -1}]`, []string{"flavorOverrides.0.priceHourly: invalid value -1 (out of bound >=0)", "flavors/pins.cue:3:"}},
		{"lowercase name", `[{name: "m"}]`, []string{"flavorOverrides.0.name", `out of bound =~"^[A-Z0-9][A-Z0-9_-]*$"`, "flavors/pins.cue:3:"}},
		{"string for a size", `[{name: "M", cpu: "3"}]`, []string{"flavorOverrides.0.cpu", `conflicting values "3" and int`, "flavors/pins.cue:3:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mod := copyModule(t)
			writePins(t, mod, tc.pins)
			for _, args := range [][]string{
				{"export", "./cue", "-e", "stream", "--out", "text"},
				{"export", "./cue", "-e", "appStream", "--out", "text"},
				{"cmd", "build", "./cue"},
			} {
				stdout, stderr, ok := cueRun(t, mod, args...)
				wantRefused(t, args, stdout, stderr, ok, tc.want)
			}
		})
	}

	// The controller agrees: the render refuses what it would drop. An overrides file with
	// the new flavor's pin as the old bundle rendered it is refused as a whole.
	base, err := catalog.LoadBase()
	if err != nil {
		t.Fatal(err)
	}
	ovs, err := catalog.ParseOverrides([]byte("- name: M\n  priceHourly: 0.1\n- name: NEW\n  cpu: 2\n"))
	if err == nil {
		_, err = catalog.New(base, "par", ovs, logr.Discard())
	}
	if err == nil {
		t.Error("the controller accepts a new flavor without memoryKi and priceHourly; the bundle's rule is stale")
	}

	// And a complete new flavor beside a pin renders, and the controller serves both.
	t.Run("valid pins", func(t *testing.T) {
		mod := copyModule(t)
		writePins(t, mod, `[{name: "M", priceHourly: 0.1}, {name: "NEW", cpu: 2, memoryKi: 1000000, priceHourly: 0.02}]`)
		stdout, stderr, ok := cueRun(t, mod, "export", "./cue", "-e", "stream", "--out", "text")
		if !ok {
			t.Fatalf("valid pins refused:\n%s", stderr)
		}
		var cm *corev1.ConfigMap
		for doc := range strings.SplitSeq(stdout, "\n---\n") {
			var obj corev1.ConfigMap
			if err := yaml.Unmarshal([]byte(doc), &obj); err == nil && obj.Kind == "ConfigMap" && obj.Name == "karpenter-flavors" {
				cm = &obj
			}
		}
		if cm == nil {
			t.Fatal("no flavors ConfigMap in the stream")
		}
		ovs, err := catalog.ParseOverrides([]byte(cm.Data["flavors.yaml"]))
		if err != nil {
			t.Fatalf("the controller rejects the rendered overrides: %v", err)
		}
		c, err := catalog.New(base, "par", ovs, logr.Discard())
		if err != nil {
			t.Fatalf("the controller cannot apply the rendered overrides: %v", err)
		}
		prices := map[string]float64{}
		for _, f := range c.Flavors() {
			prices[f.Name] = f.PriceHourly
		}
		if prices["M"] != 0.1 || prices["NEW"] != 0.02 {
			t.Errorf("prices after the pins: M %v, NEW %v; want 0.1 and 0.02", prices["M"], prices["NEW"])
		}
	})
}

// copyModule copies the CUE module (cue.mod and the packages the bundle loads, with the
// files they embed) into a temporary directory, so a test can edit flavors/pins.cue.
func copyModule(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	for _, dir := range []string{"cue.mod", "cue", "flavors", "schema"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			if d.IsDir() {
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			switch filepath.Ext(path) {
			case ".cue", ".yaml", ".json":
			default:
				return nil // Go sources and tests are not part of the module's packages
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
		})
		if err != nil {
			t.Fatalf("copying %s: %v", dir, err)
		}
	}
	return dst
}

func writePins(t *testing.T, mod, pins string) {
	t.Helper()
	src := "package flavors\n\n#pins: " + pins + "\n"
	if err := os.WriteFile(filepath.Join(mod, "flavors", "pins.cue"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}
