package cli

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
)

// width is where the help wraps its prose.
const width = 96

// writeUsage writes the top-level help: every command, then the provider's settings.
func writeUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString(Name + " runs Karpenter for Clever Kubernetes Engine (CKE), and checks a cluster before it is\ninstalled.\n\nUsage:\n")
	lines := [][2]string{}
	for _, c := range commands() {
		lines = append(lines, [2]string{c.usage(), c.summary})
	}
	pad := 0
	for _, l := range lines {
		pad = max(pad, len(l[0]))
	}
	for _, l := range lines {
		fmt.Fprintf(&b, "  %-*s  %s\n", pad, l[0], l[1])
	}
	b.WriteString("\n")
	b.WriteString(wrap("Flags may come anywhere after the command; an unknown flag or argument is refused. '"+Name+" help COMMAND' (or COMMAND --help) prints a command's flags and exit codes; '"+Name+" help controller' lists Karpenter core's flags.", ""))
	writeSettings(&b)
	_, _ = io.WriteString(w, b.String())
}

// writeCommandHelp writes `help NAME`: what the command does, its flags, and for the controller
// the provider's settings.
func writeCommandHelp(w io.Writer, c command) {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s\n\n", c.usage())
	for _, p := range c.about {
		b.WriteString(wrap(p, ""))
		b.WriteString("\n")
	}
	fs := newFlagSet(c)
	c.setup(fs)
	if c.name == Controller {
		writeSettings(&b)
		b.WriteString("\n")
		b.WriteString(wrap("Karpenter core's flags. Each falls back to the environment variable its name spells (--metrics-port: METRICS_PORT), which is how the bundle sets them; a default shown is this environment's.", ""))
		b.WriteString("\n")
	} else if hasFlags(fs) {
		b.WriteString("Flags:\n")
	}
	fs.VisitAll(func(f *flag.Flag) {
		b.WriteString(flagHelp(f))
	})
	_, _ = io.WriteString(w, b.String())
}

// usage is the command's usage line; the controller's own word is optional.
func (c command) usage() string {
	use := Name + " " + c.name
	if c.name == Controller {
		use = Name + " [" + c.name + "]"
	}
	if c.synopsis != "" {
		use += " " + c.synopsis
	}
	return use
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// flagHelp is one flag's entry: --name and its value's kind, then its usage and default.
func flagHelp(f *flag.Flag) string {
	kind, usage := flag.UnquoteUsage(f)
	head := "  --" + f.Name
	if kind != "" {
		head += " " + kind
	}
	if !zeroDefault(f) {
		usage += " (default " + f.DefValue + ")"
	}
	return head + "\n" + wrap(usage, "        ")
}

// zeroDefault tells a flag whose default goes without saying: empty, zero or false. A default a
// usage already explains ("0: CKE's default") is its own.
func zeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return true
	}
	return false
}

// Setting is one of the provider's settings as the help lists it, from controller/settings.
type Setting struct {
	// Env is its environment variable; Key its key under the bundle's values, empty for one the
	// bundle sets itself.
	Env, Key string
	// Kind is its type as the environment spells it: string, integer, boolean, duration.
	Kind string
	// Default is as the environment spells it; Rule says what the controller accepts.
	Default, Rule string
	// CoreFlag is Karpenter core's flag for the same variable, empty when core does not read it.
	CoreFlag string
}

// Settings are the provider's settings in declaration order: settings.Walk's fields, their
// tags put in words, and the flag Karpenter core has for the same variable.
func Settings() []Setting {
	types := map[string]reflect.Type{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			sf := t.Field(i)
			if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeFor[settings.Duration]() {
				walk(sf.Type)
			} else if env, ok := sf.Tag.Lookup("env"); ok {
				types[env] = sf.Type
			}
		}
	}
	walk(reflect.TypeFor[settings.Settings]())
	core := map[string]string{}
	fs := flag.NewFlagSet("core", flag.ContinueOnError)
	coreFlags(fs)
	fs.VisitAll(func(f *flag.Flag) { core[EnvOf(f.Name)] = "--" + f.Name })

	var out []Setting
	settings.Walk(func(f settings.Field) {
		s := Setting{Env: f.Env, Key: "settings." + f.Path, Kind: kind(types[f.Env]), Default: f.Default, CoreFlag: core[f.Env]}
		if strings.Split(f.Tag.Get("json"), ",")[0] == "-" {
			s.Key = ""
		}
		s.Rule = rule(s.Kind, f.Tag)
		out = append(out, s)
	}, &settings.Settings{})
	return out
}

// EnvOf is the variable a Karpenter core flag falls back to: its name in capitals, dashes as
// underscores (core's options follow it for every flag; a test holds them to it).
func EnvOf(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
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

// rule says what settings.Load accepts for a field of kind with tag.
func rule(kind string, tag reflect.StructTag) string {
	var rs []string
	switch kind {
	case "boolean":
		rs = append(rs, "true or false (also 1, 0, t, f)")
	case "integer":
		lo, hasLo := tag.Lookup("min")
		hi, hasHi := tag.Lookup("max")
		switch {
		case hasLo && hasHi:
			rs = append(rs, "an integer from "+lo+" to "+hi)
		case hasLo:
			rs = append(rs, "an integer from "+lo)
		case hasHi:
			rs = append(rs, "an integer up to "+hi)
		default:
			rs = append(rs, "an integer")
		}
	case "duration":
		r := "a positive duration (90s, 12h)"
		if below, ok := tag.Lookup("below"); ok {
			r += " below " + below
		}
		rs = append(rs, r)
	}
	if enum, ok := tag.Lookup("enum"); ok {
		rs = append(rs, "one of "+strings.ReplaceAll(enum, ",", ", "))
	}
	if p, ok := tag.Lookup("pattern"); ok {
		rs = append(rs, "matching "+p)
	}
	if tag.Get("format") == "url" {
		rs = append(rs, "empty or an absolute http(s) URL")
	}
	if len(rs) == 0 {
		return "any string"
	}
	return strings.Join(rs, "; ")
}

// writeSettings lists the provider's settings: variable, values key, default and bounds.
func writeSettings(b *strings.Builder) {
	b.WriteString("\n")
	b.WriteString(wrap("The provider's settings: environment variables, which the bundle sets from values.settings. The controller checks them before it starts; a bad one stops it with exit code 2, naming the variable. A variable Karpenter core also reads shows core's flag: set the variable, not the flag, which reaches core only. Each in full: docs/reference/settings.md.", ""))
	b.WriteString("\n")
	for _, s := range Settings() {
		where := s.Key
		if where == "" {
			where = "no values key: the bundle sets it"
		}
		if s.CoreFlag != "" {
			where += ", core's " + s.CoreFlag
		}
		def := s.Default
		if def == "" {
			def = "empty"
		}
		fmt.Fprintf(b, "  %s (%s)\n", s.Env, where)
		b.WriteString(wrap(fmt.Sprintf("%s, default %s; %s", s.Kind, def, s.Rule), "        "))
	}
}

// wrap fills text to width, each line after indent, and ends it with a newline.
func wrap(text, indent string) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
	return b.String()
}
