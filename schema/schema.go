// Package schema generates the bundle's JSON Schemas from the Go types the controller uses, so
// the CUE values, the flavor catalogue and the examples are checked against the same rules as
// the binary. Run `go run ./schema/gen` from the repository root to rewrite them.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/invopop/jsonschema"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/labels"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/schema/values"
)

const (
	module = "github.com/CleverCloud/karpenter-provider-clever-cloud"
	baseID = "https://" + module + "/schema/"

	// DurationPattern is a Go duration as time.ParseDuration reads it, without a sign: the
	// controller rejects durations that are not positive.
	DurationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	quantityPattern = `^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i|[mkMGTPE]|u|n)?$`
	// The CleverNodeClass label rules mirror the CRD's CEL rules (the apiserver remains the
	// authority); here they give examples and editors the same answer without a cluster. The
	// owned keys come from labels.OwnedKeyPattern, the one home of that rule.
	labelKeyPattern   = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	labelValuePattern = `^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`
)

// Files maps each generated schema's file name to its content.
type Files map[string][]byte

// Generate builds every schema. It runs from the repository root: invopop keys Go comments by
// the relative path it walks, so any other working directory loses every description.
func Generate() (Files, error) {
	r := &jsonschema.Reflector{
		DoNotReference: true,
		ExpandedStruct: true,
		Mapper:         mapType,
	}
	for _, pkg := range []string{"controller/catalog", "controller/settings", "controller/apis/v1alpha1", "schema"} {
		if err := r.AddGoComments(module, pkg, jsonschema.WithFullComment()); err != nil {
			return nil, fmt.Errorf("reading Go comments of %s: %w", pkg, err)
		}
	}
	if len(r.CommentMap) == 0 {
		return nil, errors.New("no Go comments found: run from the repository root")
	}
	// Full comments keep paragraphs but also carry kubebuilder markers, which are for
	// controller-gen, not for readers of the values.
	for k, c := range r.CommentMap {
		r.CommentMap[k] = stripMarkers(c)
	}

	vs := r.Reflect(&values.Values{})
	if err := annotateSettings(vs.Properties.Value("settings")); err != nil {
		return nil, err
	}
	markOverrideRequired(vs.Properties.Value("settings").Properties.Value("flavors").Items)

	override := r.Reflect(&catalog.Override{})
	markOverrideRequired(override)

	nc := r.Reflect(&cleverNodeClass{})
	constrainLabels(nc.Properties.Value("spec").Properties.Value("labels"), true)
	constrainLabels(nc.Properties.Value("metadata").Properties.Value("labels"), false)

	out := Files{}
	for name, s := range map[string]*jsonschema.Schema{
		"values.schema.json":          vs,
		"flavor.schema.json":          r.Reflect(&catalog.Flavor{}),
		"flavor-override.schema.json": override,
		"catalogue.schema.json":       r.Reflect(&catalog.Base{}),
		"clevernodeclass.schema.json": nc,
	} {
		s.ID = jsonschema.ID(baseID + name)
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", name, err)
		}
		// invopop escapes <, > and & for HTML; the schemas are read by tools, not browsers.
		b = []byte(strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(b)))
		out[name] = append(b, '\n')
	}
	return out, nil
}

func stripMarkers(c string) string {
	var keep []string
	for _, line := range strings.Split(c, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "+") {
			keep = append(keep, line)
		}
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}

// cleverNodeClass is the document a user writes: the CRD decides what the apiserver accepts,
// this lets examples and editors be checked offline.
type cleverNodeClass struct {
	// APIVersion of CleverNodeClass.
	APIVersion string `json:"apiVersion" jsonschema:"enum=karpenter.clever-cloud.com/v1alpha1"`
	// Kind is always CleverNodeClass.
	Kind string `json:"kind" jsonschema:"enum=CleverNodeClass"`
	// Metadata of the object; CleverNodeClass is cluster-scoped.
	Metadata objectMeta `json:"metadata"`
	// Spec of the class.
	Spec v1alpha1.CleverNodeClassSpec `json:"spec,omitempty"`
}

// objectMeta is the part of the metadata a manifest author writes.
type objectMeta struct {
	// Name of the object, a DNS subdomain.
	Name string `json:"name" jsonschema:"pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$,maxLength=253"`
	// Labels of the object.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations of the object.
	Annotations map[string]string `json:"annotations,omitempty"`
}

func mapType(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeFor[settings.Duration]():
		return &jsonschema.Schema{Type: "string", Pattern: DurationPattern}
	case reflect.TypeFor[resource.Quantity]():
		return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{
			{Type: "string", Pattern: quantityPattern},
			{Type: "number"},
		}}
	case reflect.TypeFor[intstr.IntOrString]():
		return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{
			{Type: "integer", Minimum: json.Number("0")},
			{Type: "string", Pattern: `^[0-9]+%$`},
		}}
	}
	return nil
}

// annotateSettings copies the settings' env, default and constraint tags into the schema, so
// the bundle can derive the Deployment's environment from the values without a second list.
func annotateSettings(s *jsonschema.Schema) error {
	var errs []error
	settings.Walk(func(f settings.Field) {
		if f.Tag.Get("json") == "-" {
			return // set by the bundle itself (FLAVORS_CONFIG_PATH from settings.flavors)
		}
		p := s
		for _, name := range splitPath(f.Path) {
			if p == nil || p.Properties == nil {
				p = nil
				break
			}
			p = p.Properties.Value(name)
		}
		if p == nil {
			errs = append(errs, fmt.Errorf("settings field %s is missing from the values schema", f.Path))
			return
		}
		if p.Extras == nil {
			p.Extras = map[string]any{}
		}
		p.Extras["x-env"] = f.Env
		def, err := typed(p.Type, f.Default)
		if err != nil {
			errs = append(errs, fmt.Errorf("default of %s: %w", f.Path, err))
			return
		}
		if v, ok := values.BundleDefaults[f.Path]; ok {
			p.Extras["x-binary-default"] = def
			def = v
		}
		p.Default = def
		// The rule Load applies, stated for the render (settings.Rule is its one home).
		r := f.Rule()
		if len(r.Enum) > 0 {
			p.Enum = nil
			for _, v := range r.Enum {
				p.Enum = append(p.Enum, v)
			}
		}
		if r.Pattern != "" {
			p.Pattern = r.Pattern
		}
		if r.URL {
			p.Pattern = settings.URLPattern
		}
		if r.Min != nil {
			p.Minimum = json.Number(strconv.Itoa(*r.Min))
		}
		if r.Max != nil {
			p.Maximum = json.Number(strconv.Itoa(*r.Max))
		}
		if r.Kind == settings.KindDuration {
			// JSON Schema cannot compare durations: the bundle enforces these at render
			// (cue/values.cue), as time.ParseDuration reads the value.
			bounds := map[string]string{"exclusiveMinimum": "0s"}
			if r.BelowText != "" {
				bounds["exclusiveMaximum"] = r.BelowText
			}
			p.Extras["x-duration"] = bounds
		}
	}, &settings.Settings{})
	if len(errs) > 0 {
		return fmt.Errorf("annotating settings: %v", errs)
	}
	return nil
}

func splitPath(p string) []string {
	var out []string
	for _, b := range bytes.Split([]byte(p), []byte(".")) {
		out = append(out, string(b))
	}
	return out
}

func typed(schemaType, raw string) (any, error) {
	switch schemaType {
	case "integer":
		return strconv.Atoi(raw)
	case "boolean":
		return strconv.ParseBool(raw)
	case "string":
		return raw, nil
	}
	return nil, fmt.Errorf("unsupported schema type %q", schemaType)
}

// markOverrideRequired makes name the one field an override must give; the Go type leaves
// required-ness to the loader.
func markOverrideRequired(s *jsonschema.Schema) {
	s.Required = []string{"name"}
}

// constrainLabels applies Kubernetes' label syntax; node labels also stay out of the prefixes
// CKE, Karpenter and the provider own.
func constrainLabels(s *jsonschema.Schema, nodeLabels bool) {
	s.PropertyNames = &jsonschema.Schema{Pattern: labelKeyPattern}
	if nodeLabels {
		// A false pattern property rather than propertyNames.not: CUE's JSON Schema
		// translation enforces the former.
		s.PatternProperties = map[string]*jsonschema.Schema{labels.OwnedKeyPattern: jsonschema.FalseSchema}
	}
	s.AdditionalProperties = &jsonschema.Schema{Type: "string", MaxLength: ptr(uint64(63)), Pattern: labelValuePattern}
}

func ptr[T any](v T) *T { return &v }
