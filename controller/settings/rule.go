package settings

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Kind is how the environment spells a setting's value.
type Kind string

// The kinds of setting: what Load parses the environment's text into.
const (
	KindString   Kind = "string"
	KindBool     Kind = "boolean"
	KindInt      Kind = "integer"
	KindDuration Kind = "duration"
)

// URLPattern is what a url-format setting accepts: empty, or an absolute http(s) URL with a
// host name or address, an optional port, and printable ASCII after it with well-formed
// escapes. It is narrower than what url.Parse reads, so that a value the JSON Schema's
// pattern accepts is one the controller accepts (FuzzURLPatternIsAccepted).
const URLPattern = `^(https?://[A-Za-z0-9.-]+(:[0-9]+)?([/?#]([!-$&-~]|%[0-9A-Fa-f]{2})*)?)?$`

// Rule is what the controller accepts for one setting, read from its field's type and tags.
// It is the one home of the settings' rules: Load applies it, the values JSON Schema states it
// (schema.annotateSettings; durations' bounds as x-duration, which cue/values.cue enforces at
// render), and docs/reference/settings.md says it (hack/docgen).
type Rule struct {
	Kind Kind
	// Min and Max bound an integer, inclusive (tags min, max).
	Min, Max *int
	// Enum lists a string's accepted values (tag enum, comma-separated).
	Enum []string
	// Pattern is a regular expression a string must match (tag pattern; RE2, as CUE and JSON
	// Schema validators read it).
	Pattern string
	// URL: a string must be empty or an absolute http(s) URL matching URLPattern (tag
	// format:"url").
	URL bool
	// Every duration is positive; Below, when set, is its exclusive upper bound (tag below),
	// BelowText that bound as the tag spells it.
	Below     time.Duration
	BelowText string
	// NoFallback: a refused value stops the controller instead of giving way to the default
	// (tag fallback:"none"), for a setting whose default may be wrong for the cluster.
	NoFallback bool
}

// Rule is the field's rule. A tag that does not parse is a programming error: it panics, and
// TestEveryRuleParses runs every one.
func (f Field) Rule() Rule {
	return ruleOf(f.Path, f.value.Type(), f.Tag)
}

func ruleOf(path string, t reflect.Type, tag reflect.StructTag) Rule {
	var r Rule
	switch {
	case t == reflect.TypeFor[Duration]():
		r.Kind = KindDuration
	case t.Kind() == reflect.String:
		r.Kind = KindString
	case t.Kind() == reflect.Bool:
		r.Kind = KindBool
	case t.Kind() == reflect.Int:
		r.Kind = KindInt
	default:
		panic(fmt.Sprintf("settings: field %s has unsupported type %s", path, t))
	}
	bound := func(name string) *int {
		v, ok := tag.Lookup(name)
		if !ok {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			panic(fmt.Sprintf("settings: field %s: bad %s %q", path, name, v))
		}
		return &n
	}
	r.Min, r.Max = bound("min"), bound("max")
	if e, ok := tag.Lookup("enum"); ok {
		r.Enum = strings.Split(e, ",")
	}
	r.Pattern = tag.Get("pattern")
	if r.Pattern != "" {
		mustCompile(r.Pattern)
	}
	r.URL = tag.Get("format") == "url"
	if b, ok := tag.Lookup("below"); ok {
		r.Below, r.BelowText = mustParseDuration(b), b
	}
	r.NoFallback = tag.Get("fallback") == "none"
	if (r.Min != nil || r.Max != nil) && r.Kind != KindInt || (len(r.Enum) > 0 || r.Pattern != "" || r.URL) && r.Kind != KindString || r.Below > 0 && r.Kind != KindDuration {
		panic(fmt.Sprintf("settings: field %s: a tag does not apply to a %s", path, r.Kind))
	}
	return r
}
