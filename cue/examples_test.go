package bundle_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	"sigs.k8s.io/yaml"
)

// TestExamples: every example parses into its Go type; CleverNodeClasses pass the schema
// generated from the Go types, and every NodePool refers to a class the examples define.
func TestExamples(t *testing.T) {
	sch, err := loadPkg(t, "schema", renderOpts{})
	if err != nil {
		t.Fatal(err)
	}
	class := sch.LookupPath(cue.ParsePath("#CleverNodeClass"))
	files, _ := filepath.Glob(filepath.Join(root, "examples", "*.yaml"))
	if len(files) < 4 {
		t.Fatalf("found %d examples", len(files))
	}
	classes, refs := map[string]bool{}, map[string]string{}
	var overlays []karpv1alpha1.NodeOverlay
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(data), "\n---\n") {
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s[%d]: %v", f, i, err)
			}
			var head struct{ Kind string }
			_ = json.Unmarshal(js, &head)
			switch head.Kind {
			case "CleverNodeClass":
				v := class.Unify(class.Context().CompileBytes(js))
				if err := v.Validate(cue.Concrete(true)); err != nil {
					t.Errorf("%s[%d]: %s", f, i, cueerrors.Details(err, nil))
				}
				var m struct{ Metadata struct{ Name string } }
				_ = json.Unmarshal(js, &m)
				classes[m.Metadata.Name] = true
			case "NodePool":
				var np karpv1.NodePool
				if err := strictJSON(js, &np); err != nil {
					t.Errorf("%s[%d]: %v", f, i, err)
				}
				refs[np.Name] = np.Spec.Template.Spec.NodeClassRef.Name
			case "Deployment":
				if err := strictJSON(js, &appsv1.Deployment{}); err != nil {
					t.Errorf("%s[%d]: %v", f, i, err)
				}
			case "NodeOverlay":
				var o karpv1alpha1.NodeOverlay
				if err := strictJSON(js, &o); err != nil {
					t.Errorf("%s[%d]: %v", f, i, err)
				}
				overlays = append(overlays, o)
			case "PodDisruptionBudget":
				if err := strictJSON(js, &policyv1.PodDisruptionBudget{}); err != nil {
					t.Errorf("%s[%d]: %v", f, i, err)
				}
			default:
				t.Errorf("%s[%d]: unexpected kind %q", f, i, head.Kind)
			}
		}
	}
	for pool, c := range refs {
		if !classes[c] {
			t.Errorf("NodePool %s refers to CleverNodeClass %s, which no example defines", pool, c)
		}
	}
	// An overlay must apply to a pool the examples define, and pass core's own checks.
	for _, o := range overlays {
		if err := o.RuntimeValidate(t.Context()); err != nil {
			t.Errorf("NodeOverlay %s: %v", o.Name, err)
		}
		for _, r := range o.Spec.Requirements {
			if r.Key != karpv1.NodePoolLabelKey {
				continue
			}
			for _, pool := range r.Values {
				if _, ok := refs[pool]; !ok {
					t.Errorf("NodeOverlay %s applies to NodePool %s, which no example defines", o.Name, pool)
				}
			}
		}
	}
	// The schema must reject what the CRD rejects, or passing it would mean little.
	// Owned keys come from controller/labels.OwnedKeyPattern.
	for _, key := range []string{"karpenter.sh/nodepool", "sub.karpenter.sh/x", "topology.kubernetes.io/zone", "clever-cloud.com/flavor", "karpenter.clever-cloud.com/x"} {
		bad := class.Unify(class.Context().CompileString(`{apiVersion: "karpenter.clever-cloud.com/v1alpha1", kind: "CleverNodeClass", metadata: name: "x", spec: labels: "` + key + `": "x"}`))
		if bad.Validate(cue.Concrete(true)) == nil {
			t.Errorf("the owned label key %s passed the CleverNodeClass schema", key)
		}
	}
	good := class.Unify(class.Context().CompileString(`{apiVersion: "karpenter.clever-cloud.com/v1alpha1", kind: "CleverNodeClass", metadata: name: "x", spec: labels: "topology.kubernetes.io/rack": "x"}`))
	if err := good.Validate(cue.Concrete(true)); err != nil {
		t.Errorf("a user label key failed the CleverNodeClass schema: %v", err)
	}
}

func strictJSON(js []byte, into any) error {
	d := json.NewDecoder(bytes.NewReader(js))
	d.DisallowUnknownFields()
	return d.Decode(into)
}
