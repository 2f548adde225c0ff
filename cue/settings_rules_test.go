package bundle_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	cuejson "cuelang.org/go/encoding/json"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
)

// candidate is a value a user may write for a setting in a values file. boundary marks one
// the controller accepts at the edge of its rule, which must render.
type candidate struct {
	value    any
	boundary bool
}

// candidates are values on both sides of every edge of the setting's rule (settings.Rule),
// plus the spellings a user might try.
func candidates(f settings.Field, r settings.Rule) []candidate {
	var cs []candidate
	add := func(boundary bool, vs ...any) {
		for _, v := range vs {
			cs = append(cs, candidate{v, boundary})
		}
	}
	switch r.Kind {
	case settings.KindBool:
		add(true, true, false)
		add(false, "true", "yes", 1, "")
	case settings.KindInt:
		add(false, -1, 0, 1, 2, 65535, 65536, 1<<31, "8080", 1.5, true)
		if r.Min != nil {
			add(true, *r.Min)
			add(false, *r.Min-1)
		}
		if r.Max != nil {
			add(true, *r.Max)
			add(false, *r.Max+1)
		}
	case settings.KindDuration:
		add(true, "1ns", "1h30m", "2562047h")
		add(false, "0s", "0", "0.0s", "0.5ns", "-1s", "+5s", ".5s", "1d", "10", "", "ten seconds", "2562048h", "9999999999h", 10, "1μs", "12h")
		if r.Below > 0 {
			add(true, (r.Below - time.Nanosecond).String(), (r.Below - time.Second).String())
			add(false, r.BelowText, r.Below.String(), (r.Below + time.Nanosecond).String(), (2 * r.Below).String())
		}
	case settings.KindString:
		add(false, "", " par", 1, true)
		switch {
		case len(r.Enum) > 0:
			add(true, anySlice(r.Enum)...)
			add(false, "trace", "INFO", "info ", "par")
		case r.URL:
			add(true, "https://api.clever-cloud.com", "http://proxy.internal:8080/clever/", "https://prices.example/ps?zone=par#x")
			add(false, "ftp://x", "http://[::1", "http://a/%zz", "https://", "api.clever-cloud.com", "http://a b", "/v4/kubernetes-product")
		default: // patterns: region, topology, feature gates
			add(false, "par", "par-2", "PAR", "1par", "par 1", "a_b", "ALL_IN_ONE", "DISTRIBUTED", "all_in_one", "ALL-IN-ONE",
				"NodeRepair=true", "NodeRepair=true,ReservedCapacity=false", "NodeRepair=yes", "NodeRepair=true,", "A=B", "Node-Repair=true")
		}
	}
	add(true, typedDefault(f, r))
	return cs
}

func typedDefault(f settings.Field, r settings.Rule) any {
	switch r.Kind {
	case settings.KindBool:
		b, _ := strconv.ParseBool(f.Default)
		return b
	case settings.KindInt:
		n, _ := strconv.Atoi(f.Default)
		return n
	}
	return f.Default
}

// nest puts v at the setting's path under values.settings.
func nest(path string, v any) map[string]any {
	parts := strings.Split(path, ".")
	var m any = v
	for i := len(parts) - 1; i >= 0; i-- {
		m = map[string]any{parts[i]: m}
	}
	return map[string]any{"settings": m}
}

// namesField says whether a render error names the setting: at its own path, or, for a
// duration's bound, under _refused beside it (cue/values.cue).
func namesField(msg, path string) bool {
	dir, leaf := "", path
	if i := strings.LastIndex(path, "."); i >= 0 {
		dir, leaf = path[:i+1], path[i+1:]
	}
	return strings.Contains(msg, "values.settings."+path+":") || strings.Contains(msg, "values.settings."+dir+"_refused."+leaf+":")
}

// TestRenderRefusesWhatTheControllerRefuses walks every setting and values on both sides of
// each edge of its rule: a value the controller refuses (as the bundle would hand it over) is
// refused by the render, naming the setting; a value that renders is one the controller
// accepts, read from the rendered Deployment; a boundary value the controller accepts renders.
// Strings are held both ways: the render and the controller agree on every one but the empty
// string (left unset, so the controller's default) and those with surrounding space (which
// the controller trims).
func TestRenderRefusesWhatTheControllerRefuses(t *testing.T) {
	base, err := loadPkg(t, "cue", renderOpts{})
	if err != nil {
		t.Fatal(cueerrors.Details(err, nil))
	}
	ctx := base.Context()
	n := 0
	start := time.Now()
	settings.Walk(func(f settings.Field) {
		if f.Tag.Get("json") == "-" {
			return // set by the bundle itself
		}
		r := f.Rule()
		for _, c := range candidates(f, r) {
			n++
			name := fmt.Sprintf("%s=%#v", f.Path, c.value)
			js, err := json.Marshal(nest(f.Path, c.value))
			if err != nil {
				t.Fatal(err)
			}
			expr, err := cuejson.Extract("values.json", js)
			if err != nil {
				t.Fatal(err)
			}
			v := base.FillPath(cue.ParsePath("values"), ctx.BuildExpr(expr))
			// The values and the Deployment that reads them: the rest of the bundle (the CRDs
			// above all) takes most of a render's time and reads no setting.
			dep := v.LookupPath(cue.ParsePath("objects.app.deployment"))
			renderErr := v.LookupPath(cue.ParsePath("values")).Validate(cue.Concrete(true), cue.All())
			if renderErr == nil {
				renderErr = dep.Validate(cue.Concrete(true), cue.All())
			}
			var env map[string]string
			if renderErr == nil {
				var d appsv1.Deployment
				if err := dep.Decode(&d); err != nil {
					t.Fatalf("%s: decoding the Deployment: %v", name, err)
				}
				env = map[string]string{}
				for k, e := range envOf(&d) {
					if e.ValueFrom == nil {
						env[k] = e.Value
					}
				}
			} else if s := fmt.Sprint(c.value); s != "" {
				// What the bundle hands over: "\(value)", an empty string left unset.
				env = map[string]string{f.Env: s}
			}
			_, binErr := settings.LoadFrom(func(k string) (string, bool) { s, ok := env[k]; return s, ok })

			switch {
			case renderErr == nil && binErr != nil:
				t.Errorf("%s renders, and the controller refuses what was rendered: %v", name, binErr)
			case renderErr != nil && binErr != nil:
				if msg := cueerrors.Details(renderErr, nil); !namesField(msg, f.Path) {
					t.Errorf("%s is refused, but the error does not name values.settings.%s:\n%s", name, f.Path, msg)
				}
			case renderErr != nil && c.boundary:
				t.Errorf("%s: the controller accepts it, but the render refuses it:\n%s", name, cueerrors.Details(renderErr, nil))
			// An empty string is left unset, the controller's default: the render may refuse it.
			case renderErr != nil && r.Kind == settings.KindString && isString(c.value) && c.value != "" && strings.TrimSpace(c.value.(string)) == c.value:
				t.Errorf("%s: the controller accepts it, but the render refuses it:\n%s", name, cueerrors.Details(renderErr, nil))
			}
		}
	}, &settings.Settings{})
	t.Logf("%d values rendered in %v", n, time.Since(start))
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func isString(v any) bool { _, ok := v.(string); return ok }
