package schema_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/schema"
)

// The generator runs from the repository root, as `go run ./schema/gen` does.
func TestMain(m *testing.M) {
	if err := os.Chdir(".."); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// TestSchemasAreCurrent fails when a Go type changed and `go run ./schema/gen` was not run.
func TestSchemasAreCurrent(t *testing.T) {
	files, err := schema.Generate()
	if err != nil {
		t.Fatal(err)
	}
	again, err := schema.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		if !bytes.Equal(want, again[name]) {
			t.Errorf("%s: output is not deterministic", name)
		}
		got, err := os.ReadFile(filepath.Join("schema", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("schema/%s is stale: run hack/generate-bundle.sh", name)
		}
	}
}

// TestSettingsAnnotated: every setting carries its env var, its default and a description,
// so the bundle can derive the Deployment from the schema alone.
func TestSettingsAnnotated(t *testing.T) {
	files, err := schema.Generate()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Settings map[string]json.RawMessage `json:"settings"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(files["values.schema.json"], &doc); err != nil {
		t.Fatal(err)
	}
	var props map[string]map[string]any
	if err := json.Unmarshal(doc.Properties.Settings["properties"], &props); err != nil {
		t.Fatal(err)
	}
	settings.Walk(func(f settings.Field) {
		if f.Tag.Get("json") == "-" {
			if _, ok := props["flavors"]; !ok {
				t.Errorf("%s is replaced by settings.flavors, which is missing", f.Env)
			}
			return
		}
		p := lookup(t, props, f.Path)
		if p == nil {
			t.Errorf("%s: no schema property %s", f.Env, f.Path)
			return
		}
		if p["x-env"] != f.Env {
			t.Errorf("%s: x-env %v, want %s", f.Path, p["x-env"], f.Env)
		}
		if _, ok := p["default"]; !ok {
			t.Errorf("%s: no default", f.Path)
		}
		// AddGoComments silently yields nothing when given an absolute path.
		if d, _ := p["description"].(string); d == "" {
			t.Errorf("%s: no description from the Go comment", f.Path)
		}
	}, &settings.Settings{})
}

func lookup(t *testing.T, props map[string]map[string]any, path string) map[string]any {
	t.Helper()
	var cur map[string]any
	parts := bytes.Split([]byte(path), []byte("."))
	for i, part := range parts {
		if i == 0 {
			cur = props[string(part)]
			continue
		}
		sub, _ := cur["properties"].(map[string]any)
		next, _ := sub[string(part)].(map[string]any)
		cur = next
	}
	return cur
}
