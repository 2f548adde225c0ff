package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
)

// Setting is one environment-backed field of settings.Settings.
type Setting struct {
	settings.Field
	// Key is the field's key under the bundle's values.settings, empty for a field the values
	// do not carry (json:"-").
	Key string
	// Kind is the field's type as the environment spells it: string, integer, boolean, duration.
	Kind string
	// Doc is the field's doc comment, as one paragraph.
	Doc string
	// Rule is what the controller accepts, from the field's tags and type.
	Rule string
}

// Settings are the controller's settings in declaration order, with the doc comments of
// controller/settings under root.
func Settings(root string) ([]Setting, error) {
	docs, err := fieldDocs(filepath.Join(root, "controller", "settings"))
	if err != nil {
		return nil, err
	}
	types := map[string]reflect.StructField{}
	owners := map[string]string{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			sf := t.Field(i)
			if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeFor[settings.Duration]() {
				walk(sf.Type)
				continue
			}
			if env, ok := sf.Tag.Lookup("env"); ok {
				types[env], owners[env] = sf, t.Name()
			}
		}
	}
	walk(reflect.TypeFor[settings.Settings]())

	var out []Setting
	var s settings.Settings
	var missing []string
	settings.Walk(func(f settings.Field) {
		sf := types[f.Env]
		doc, ok := docs[owners[f.Env]+"."+sf.Name]
		if !ok {
			missing = append(missing, f.Env)
		}
		key := "settings." + f.Path
		if strings.Split(sf.Tag.Get("json"), ",")[0] == "-" {
			key = ""
		}
		out = append(out, Setting{Field: f, Key: key, Kind: kind(sf.Type), Doc: doc, Rule: rule(f.Rule())})
	}, &s)
	if len(missing) > 0 {
		return nil, fmt.Errorf("settings without a doc comment: %s", strings.Join(missing, ", "))
	}
	// A field's doc names other fields by their Go names: name them as a user sets them. A
	// name two structs share (Enabled) names the field beside it.
	named := map[string]int{}
	for _, o := range out {
		named[types[o.Env].Name]++
	}
	for i := range out {
		for _, o := range out {
			if named[types[o.Env].Name] > 1 && owners[o.Env] != owners[out[i].Env] {
				continue
			}
			re := regexp.MustCompile(`\b` + types[o.Env].Name + `\b`)
			out[i].Doc = re.ReplaceAllString(out[i].Doc, "`"+o.Env+"`")
		}
	}
	return out, nil
}

// fieldDocs reads the doc comments of every struct field in dir's non-test Go files, keyed
// Type.Field, each as one paragraph.
func fieldDocs(dir string) (map[string]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			for _, fld := range st.Fields.List {
				for _, name := range fld.Names {
					docs[ts.Name.Name+"."+name.Name] = strings.Join(strings.Fields(fld.Doc.Text()), " ")
				}
			}
			return false
		})
	}
	return docs, nil
}

func kind(t reflect.Type) string {
	if t == reflect.TypeFor[settings.Duration]() {
		return "duration"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int:
		return "integer"
	default:
		return t.Kind().String()
	}
}

// rule says in words what settings.Load accepts for the field: its settings.Rule, which the
// bundle's render enforces too.
func rule(r settings.Rule) string {
	var rs []string
	switch r.Kind {
	case settings.KindBool:
		rs = append(rs, "`true` or `false` (also `1`, `0`, `t`, `f`)")
	case settings.KindInt:
		switch {
		case r.Min != nil && r.Max != nil:
			rs = append(rs, fmt.Sprintf("an integer from %d to %d", *r.Min, *r.Max))
		case r.Min != nil:
			rs = append(rs, fmt.Sprintf("an integer ≥ %d", *r.Min))
		default:
			rs = append(rs, "an integer")
		}
	case settings.KindDuration:
		d := "a positive Go duration (`90s`, `12h`)"
		if r.BelowText != "" {
			d += ", below `" + r.BelowText + "`"
		}
		rs = append(rs, d)
	}
	if len(r.Enum) > 0 {
		rs = append(rs, "one of `"+strings.Join(r.Enum, "`, `")+"`")
	}
	if r.Pattern != "" {
		rs = append(rs, "matches `"+r.Pattern+"`")
	}
	if r.URL {
		rs = append(rs, "empty, or an absolute `http` or `https` URL")
	}
	if r.NoFallback {
		rs = append(rs, "a refused value stops the controller")
	}
	if len(rs) == 0 {
		return "any string"
	}
	return strings.Join(rs, "; ")
}

// EnvVar is one variable of the controller container as the rendered bundle sets it.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// From says where a valueFrom variable comes from.
	From string `json:"-"`
}

// BundleEnv is the controller container's environment in out/karpenter.yaml, the bundle
// rendered with the default values, in order.
func BundleEnv(root string) ([]EnvVar, error) {
	b, err := os.ReadFile(filepath.Join(root, "out", "karpenter.yaml"))
	if err != nil {
		return nil, err
	}
	for doc := range bytes.SplitSeq(b, []byte("\n---\n")) {
		var obj struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Name string `json:"name"`
							Env  []struct {
								Name      string         `json:"name"`
								Value     string         `json:"value"`
								ValueFrom map[string]any `json:"valueFrom"`
							} `json:"env"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil || obj.Kind != "Deployment" {
			continue
		}
		for _, c := range obj.Spec.Template.Spec.Containers {
			if c.Name != "controller" {
				continue
			}
			var out []EnvVar
			for _, e := range c.Env {
				v := EnvVar{Name: e.Name, Value: e.Value}
				if e.ValueFrom != nil {
					v.From = valueFrom(e.ValueFrom)
				}
				out = append(out, v)
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("out/karpenter.yaml has no Deployment with a controller container")
}

func valueFrom(vf map[string]any) string {
	if f, ok := vf["fieldRef"].(map[string]any); ok {
		return fmt.Sprintf("the pod's `%v`", f["fieldPath"])
	}
	if r, ok := vf["resourceFieldRef"].(map[string]any); ok {
		return fmt.Sprintf("the container's `%v`", r["resource"])
	}
	keys := make([]string, 0, len(vf))
	for k := range vf {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return "a `" + strings.Join(keys, "`, `") + "`"
}

// SettingsPage is docs/reference/settings.md.
func SettingsPage(root string) ([]byte, error) {
	ours, err := Settings(root)
	if err != nil {
		return nil, err
	}
	bundle, err := BundleEnv(root)
	if err != nil {
		return nil, err
	}
	core, err := CoreOptions()
	if err != nil {
		return nil, err
	}
	inBundle := map[string]EnvVar{}
	for _, e := range bundle {
		inBundle[e.Name] = e
	}
	coreByEnv := map[string]CoreOption{}
	for _, o := range core {
		if o.Env != "" {
			coreByEnv[o.Env] = o
		}
	}
	oursByEnv := map[string]bool{}
	for _, s := range ours {
		oursByEnv[s.Env] = true
	}

	var b bytes.Buffer
	b.WriteString(generatedHeader("Settings", "go run ./hack/docgen"))
	b.WriteString("The controller is configured by environment variables only; the bundle sets them from\n")
	b.WriteString("`values.settings` (`cue/values.cue`, checked against `schema/values.schema.json`). Two groups:\n\n")
	b.WriteString("- [the provider's settings](#the-providers-settings) (`controller/settings`): validated at\n")
	b.WriteString("  render, by the same rules (`settings.Rule`), and again at start-up, where a refused value\n")
	b.WriteString("  gives way to the setting's default, reported in the log and in\n")
	b.WriteString("  `karpenter_clevercloud_settings_refused`; only a refused region stops the controller, exit code 2\n")
	b.WriteString("  ([troubleshooting](../troubleshooting.md#a-setting-is-refused));\n")
	b.WriteString("- [Karpenter core's options](#karpenter-cores-options) (`sigs.k8s.io/karpenter`\n")
	b.WriteString("  `pkg/operator/options`), read by core itself, as environment variables or as flags.\n\n")
	b.WriteString("Some variables are in both: the provider validates them first, core uses them.\n\n")

	b.WriteString("## The provider's settings\n\n")
	b.WriteString("\"The bundle sets\" is the value `cue export` renders with the default values: *same* when it\n")
	b.WriteString("is the binary's default, — when the bundle leaves the variable unset.\n\n")
	b.WriteString("| variable | values key | type | default (binary) | the bundle sets |\n|---|---|---|---|---|\n")
	for _, s := range ours {
		key := "—"
		if s.Key != "" {
			key = "`" + s.Key + "`"
		}
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s | %s | %s |\n", s.Env, strings.ToLower(s.Env), key, s.Kind, literal(s.Default), bundleValue(inBundle, s.Env, s.Default))
	}
	for _, s := range ours {
		fmt.Fprintf(&b, "\n### %s\n\n", s.Env)
		if s.Key != "" {
			fmt.Fprintf(&b, "- values key: `%s`\n", s.Key)
		} else {
			b.WriteString("- values key: none (the bundle sets it)\n")
		}
		fmt.Fprintf(&b, "- type: %s\n", s.Kind)
		fmt.Fprintf(&b, "- default: %s", literal(s.Default))
		if e, ok := inBundle[s.Env]; ok && e.Value != s.Default {
			fmt.Fprintf(&b, " (the bundle sets %s)", literal(e.Value))
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "- accepts: %s\n", s.Rule)
		if o, ok := coreByEnv[s.Env]; ok {
			fmt.Fprintf(&b, "- also read by Karpenter core (`--%s`)\n", o.Flag)
		}
		fmt.Fprintf(&b, "\n%s\n", s.Doc)
	}

	b.WriteString("\n## Karpenter core's options\n\n")
	b.WriteString("Karpenter core (`sigs.k8s.io/karpenter` " + coreVersion() + ") reads these from its flag set, each\n")
	b.WriteString("flag falling back to its environment variable; the bundle passes no flags, only variables.\n")
	b.WriteString("Core validates `LOG_LEVEL`, `PREFERENCE_POLICY`, `MIN_VALUES_POLICY`, `FEATURE_GATES` and\n")
	b.WriteString("`SCHEDULER_CONFIG` at start-up; a\n")
	b.WriteString("malformed number, boolean or duration in a variable core alone reads is ignored and the\n")
	b.WriteString("default used. A flag given on the command line wins over its variable.\n\n")
	b.WriteString("\"The bundle sets\" is as above; — leaves core's default.\n\n")
	b.WriteString("| flag | variable | default | the bundle sets | description |\n|---|---|---|---|---|\n")
	for _, o := range core {
		env := "—"
		if o.Env != "" {
			env = "`" + o.Env + "`"
			if oursByEnv[o.Env] {
				env += " (also [ours](#" + strings.ToLower(o.Env) + "))"
			}
		}
		set := "—"
		if o.Env != "" {
			set = bundleValue(inBundle, o.Env, o.Default)
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s | %s |\n", o.Flag, env, literal(o.Default), set, cell(o.Usage))
	}

	b.WriteString("\n### Feature gates\n\n")
	b.WriteString("`FEATURE_GATES` (`settings.featureGates`) is a comma-separated list of `Name=true|false`;\n")
	b.WriteString("gates left out keep core's default.\n\n")
	b.WriteString("| gate | core's default | stage | what it does |\n|---|---|---|---|\n")
	for _, g := range FeatureGates() {
		fmt.Fprintf(&b, "| `%s` | %t | %s | %s |\n", g.Name, g.Default, g.Stage, cell(g.Help))
	}

	var other []EnvVar
	for _, e := range bundle {
		if !oursByEnv[e.Name] && coreByEnv[e.Name].Env == "" {
			other = append(other, e)
		}
	}
	if len(other) > 0 {
		b.WriteString("\n### Other variables the bundle sets\n\n")
		b.WriteString("| variable | value |\n|---|---|\n")
		for _, e := range other {
			v := literal(e.Value)
			if e.From != "" {
				v = e.From
			}
			fmt.Fprintf(&b, "| `%s` | %s |\n", e.Name, v)
		}
	}
	return b.Bytes(), nil
}

func bundleValue(inBundle map[string]EnvVar, env, def string) string {
	e, ok := inBundle[env]
	switch {
	case !ok:
		return "—"
	case e.From != "":
		return e.From
	case e.Value == def:
		return "same"
	default:
		return literal(e.Value)
	}
}

func literal(s string) string {
	if s == "" {
		return "empty"
	}
	return "`" + s + "`"
}

// cell makes text safe in a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}
