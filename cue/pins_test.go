package bundle_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/yaml"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/schema/values"
)

// sharingBug is the minimal reproducer of the CUE v0.17.1 evaluator bug that rendered the
// first pin of settings.flavors as {} (issue 32): a struct embedding a reference (p.a) loses
// the reference's fields when it also holds an `if` whose body declares a `let`, once
// something (x) refers to the struct first. CUE v0.16.1, and v0.17.1 with structure sharing
// off (CUE_DEBUG=sharing=0), give out: {n: 1, z: 1}.
const sharingBug = `
x: out
f: n: 1
p: a: f
out: {
	p.a
	if p.a != _|_ {
		let l = p
		z: l.a.n
	}
}
`

// TestCUESharingBugReproducer documents the evaluator bug cue/flavors.cue is written around.
// It fails once the pinned CUE evaluates the reproducer right: the workaround's comment in
// flavors.cue and this test can then go (TestBundleIndependentOfSharing stays).
func TestCUESharingBugReproducer(t *testing.T) {
	eval := func(ctx *cue.Context) map[string]int {
		v := ctx.CompileString(sharingBug).LookupPath(cue.ParsePath("out"))
		var out map[string]int
		if err := v.Decode(&out); err != nil {
			t.Fatalf("decoding out: %s", cueerrors.Details(err, nil))
		}
		return out
	}
	if got, want := eval(cuecontext.New(cuecontext.CUE_DEBUG("sharing=0"))), map[string]int{"n": 1, "z": 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("without structure sharing out is %v, want %v: the reproducer no longer shows what it documents", got, want)
	}
	if got := eval(cuecontext.New()); !reflect.DeepEqual(got, map[string]int{"z": 1}) {
		t.Errorf("the pinned CUE now keeps the embedded field (out is %v): the evaluator bug is fixed; drop this test and the workaround's comment in cue/flavors.cue", got)
	}
}

// twoPins pins the first two flavors of a list, M and S, away from their catalogue prices
// (0.1167 and 0.0889): the bug rendered the first entry as {}, and the controller then
// refused the whole file, serving neither.
var twoPins = map[string]float64{"M": 0.1, "S": 0.05}

const (
	twoPinsCUE  = `[{name: "M", priceHourly: 0.1}, {name: "S", priceHourly: 0.05}]`
	twoPinsYAML = "settings:\n  flavors:\n    - {name: M, priceHourly: 0.1}\n    - {name: S, priceHourly: 0.05}\n"
	twoPinsJSON = `{"settings": {"flavors": [{"name": "M", "priceHourly": 0.1}, {"name": "S", "priceHourly": 0.05}]}}`
)

func pinsOverlay(pins string) map[string]string {
	return map[string]string{"flavors/pins.cue": "package flavors\n\n#pins: " + pins + "\n"}
}

// servedPrices starts the controller's catalogue on what was rendered, as the controller
// does: catalog.Load on the ConfigMap's file at the path the Deployment's FLAVORS_CONFIG_PATH
// names, through the volume the Deployment mounts. It fails unless the overrides are in force
// (karpenter_clevercloud_catalog_overrides_valid 1), and returns each flavor's price.
func servedPrices(t *testing.T, objs []map[string]any) map[string]float64 {
	t.Helper()
	raw := find(objs, "ConfigMap", "karpenter-flavors")
	if raw == nil {
		t.Fatal("no flavors ConfigMap rendered")
	}
	var cm corev1.ConfigMap
	if err := strict(raw, &cm); err != nil {
		t.Fatalf("flavors ConfigMap: %v", err)
	}
	d := deployment(t, objs)
	path := envOf(d)["FLAVORS_CONFIG_PATH"].Value
	if path != values.FlavorsMountPath+"/flavors.yaml" {
		t.Errorf("FLAVORS_CONFIG_PATH=%q, want %s/flavors.yaml", path, values.FlavorsMountPath)
	}
	file := mountedFile(t, d, cm, path)
	c, err := catalog.Load(file, "par", logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	var m dto.Metric
	if err := catalog.OverridesValid.Write(&m); err != nil {
		t.Fatal(err)
	}
	if v := m.GetGauge().GetValue(); v != 1 {
		t.Fatalf("the controller refused the rendered overrides (overrides_valid %v):\n%s", v, cm.Data["flavors.yaml"])
	}
	prices := map[string]float64{}
	for _, f := range c.Flavors() {
		prices[f.Name] = f.PriceHourly
	}
	return prices
}

// mountedFile writes the ConfigMap's key that the Deployment mounts at path into a temporary
// directory, as the kubelet would, and returns where.
func mountedFile(t *testing.T, d *appsv1.Deployment, cm corev1.ConfigMap, path string) string {
	t.Helper()
	dir, key := filepath.Split(path)
	var volume string
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		if filepath.Clean(m.MountPath) == filepath.Clean(dir) {
			volume = m.Name
		}
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == volume && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
			data, ok := cm.Data[key]
			if !ok {
				t.Fatalf("FLAVORS_CONFIG_PATH=%s names key %s, which ConfigMap %s lacks", path, key, cm.Name)
			}
			file := filepath.Join(t.TempDir(), key)
			if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			return file
		}
	}
	t.Fatalf("FLAVORS_CONFIG_PATH=%q is not in a volume of ConfigMap %s", path, cm.Name)
	return ""
}

func wantPrices(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for name, p := range want {
		if got[name] != p {
			t.Errorf("the controller serves %s at %v, want the pinned %v (all: %v)", name, got[name], p, got)
		}
	}
}

// decodeStream splits a multi-document YAML stream into objects.
func decodeStream(t *testing.T, stream string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for doc := range strings.SplitSeq(stream, "\n---\n") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("decoding the stream: %v", err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

// TestPinRoutesChangeServedPrice renders two pins along every route a user has to the
// controller, decodes what was rendered, and starts the controller's catalogue on it: each
// pinned price must be the price served.
func TestPinRoutesChangeServedPrice(t *testing.T) {
	t.Run("Go API", func(t *testing.T) {
		for name, o := range map[string]renderOpts{
			"flavors/pins.cue":        {overlay: pinsOverlay(twoPinsCUE)},
			"values YAML":             {values: twoPinsYAML},
			"values JSON":             {values: twoPinsJSON},
			"pins.cue and values":     {overlay: pinsOverlay(`[{name: "M", priceHourly: 0.1}]`), values: "settings: {flavors: [{name: S, priceHourly: 0.05}]}"},
			"a complete new flavor":   {values: "settings: {flavors: [{name: NEW, cpu: 2, memoryKi: 1000000, priceHourly: 0.02}, {name: M, priceHourly: 0.1}, {name: S, priceHourly: 0.05}]}"},
			"a pin of cpu goes first": {values: "settings: {flavors: [{name: L, cpu: 13}, {name: M, priceHourly: 0.1}, {name: S, priceHourly: 0.05}]}"},
		} {
			t.Run(name, func(t *testing.T) { wantPrices(t, servedPrices(t, mustRender(t, o)), twoPins) })
		}
	})

	dir := t.TempDir()
	yamlFile, jsonFile := filepath.Join(dir, "my-values.yaml"), filepath.Join(dir, "my-values.json")
	for f, data := range map[string]string{yamlFile: twoPinsYAML, jsonFile: twoPinsJSON} {
		if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The cue commands of the README and docs/configuration.md, and make generate's export
	// into out/karpenter.yaml, which the dev loop (ko apply -f out/) applies.
	cli := func(t *testing.T, dir string, args ...string) []map[string]any {
		t.Helper()
		stdout, stderr, ok := cueRun(t, dir, args...)
		if !ok {
			t.Fatalf("cue %s:\n%s", strings.Join(args, " "), stderr)
		}
		return decodeStream(t, stdout)
	}
	t.Run("cue export values YAML", func(t *testing.T) {
		wantPrices(t, servedPrices(t, cli(t, root, "export", "./cue", "-l", "values:", yamlFile, "-e", "stream", "--out", "text")), twoPins)
	})
	t.Run("cue export values JSON", func(t *testing.T) {
		wantPrices(t, servedPrices(t, cli(t, root, "export", "./cue", "-l", "values:", jsonFile, "-e", "stream", "--out", "text")), twoPins)
	})
	t.Run("cue export -e flavorOverrides", func(t *testing.T) {
		stdout, stderr, ok := cueRun(t, root, "export", "./cue", "-l", "values:", yamlFile, "-e", "flavorOverrides")
		if !ok {
			t.Fatal(stderr)
		}
		var got []catalog.Override
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got) != 2 || got[0].Name != "M" || got[1].Name != "S" {
			t.Errorf("flavorOverrides %s (%v), want M's pin then S's", stdout, err)
		}
	})
	t.Run("flavors/pins.cue through cue export and out/", func(t *testing.T) {
		mod := copyModule(t)
		writePins(t, mod, twoPinsCUE)
		wantPrices(t, servedPrices(t, cli(t, mod, "export", "./cue", "-e", "stream", "--out", "text")), twoPins)
		wantPrices(t, servedPrices(t, cli(t, mod, "export", "./cue", "-e", "appStream", "--out", "text")), twoPins)
	})
	t.Run("make render", func(t *testing.T) {
		out, stderr, ok := makeRender(t, "IMAGE="+digestRef, "VALUES="+yamlFile)
		if !ok {
			t.Fatalf("make render:\n%s", stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		wantPrices(t, servedPrices(t, decodeStream(t, string(b))), twoPins)
	})
	// `karpenter-clevercloud values` carries an upstream install's flavors over entry by entry.
	t.Run("values subcommand", func(t *testing.T) {
		base, err := catalog.Load("", "par", logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		price := func(p float64) *float64 { return &p }
		snap := &preflight.Snapshot{
			Version: &version.Info{GitVersion: "v1.37.2"},
			Catalog: base,
			Upstream: &preflight.UpstreamInstall{
				Deployment: &appsv1.Deployment{},
				Flavors:    []catalog.Override{{Name: "M", PriceHourly: price(0.1)}, {Name: "S", PriceHourly: price(0.05)}},
			},
		}
		var b strings.Builder
		if err := preflight.BuildValues(snap, "test").Write(&b); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "karpenter-values.yaml")
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		wantPrices(t, servedPrices(t, cli(t, root, "export", "./cue", "-l", "values:", file, "-e", "stream", "--out", "text")), twoPins)
	})
}

// TestBundleIndependentOfSharing renders the bundle with CUE's structure sharing on and off:
// the two must agree, so that no other part of the bundle is hit by the evaluator bug behind
// TestCUESharingBugReproducer, or by another of its kind.
func TestBundleIndependentOfSharing(t *testing.T) {
	for name, o := range map[string]renderOpts{
		"defaults":         {},
		"pins":             {overlay: pinsOverlay(twoPinsCUE), values: "settings: {flavors: [{name: NEW, cpu: 2, memoryKi: 1000000, priceHourly: 0.02}]}"},
		"every object":     {values: everything},
		"settings changed": {values: "settings: {launchGiveUpAfter: 14m, quota: {cpu: 80, memory: 80}, pricing: {refreshPeriod: 1h}}\nextraEnv: [{name: GOGC, value: \"50\"}]\n"},
	} {
		t.Run(name, func(t *testing.T) {
			shared := mustRender(t, o)
			o.noSharing = true
			unshared := mustRender(t, o)
			if !reflect.DeepEqual(shared, unshared) {
				a, _ := yaml.Marshal(shared)
				b, _ := yaml.Marshal(unshared)
				t.Errorf("the bundle renders differently with structure sharing (CUE evaluator bug?):\n--- shared\n%s\n--- unshared\n%s", a, b)
			}
		})
	}
}
