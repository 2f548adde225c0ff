package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
)

// width is where the help wraps its prose.
const width = 96

// writeUsage writes the top-level help: every command, then the provider's settings.
func writeUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString(wrap(Name+" runs Karpenter for Clever Kubernetes Engine (CKE), and checks a cluster before it is installed.", ""))
	b.WriteString("\nUsage:\n")
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
	head := "  " + dashed(f.Name)
	if kind != "" {
		head += " " + kind
	}
	if !zeroDefault(f) {
		usage += " (default " + f.DefValue + ")"
	}
	return head + "\n" + wrap(usage, "        ")
}

// dashed spells a flag as the help and the docs do: a one-letter alias (explain's -n, -o) with
// one dash, as kubectl users type it; the flag package takes either.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
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

// Settings are the provider's settings in declaration order: settings.Walk's fields, each
// field's settings.Rule (the one Load applies and the render enforces) put in words, and the
// flag Karpenter core has for the same variable.
func Settings() []Setting {
	core := map[string]string{}
	fs := flag.NewFlagSet("core", flag.ContinueOnError)
	coreFlags(fs)
	fs.VisitAll(func(f *flag.Flag) { core[EnvOf(f.Name)] = "--" + f.Name })

	var out []Setting
	settings.Walk(func(f settings.Field) {
		r := f.Rule()
		s := Setting{Env: f.Env, Key: "settings." + f.Path, Kind: string(r.Kind), Default: f.Default, Rule: rule(r), CoreFlag: core[f.Env]}
		if strings.Split(f.Tag.Get("json"), ",")[0] == "-" {
			s.Key = ""
		}
		out = append(out, s)
	}, &settings.Settings{})
	return out
}

// EnvOf is the variable a Karpenter core flag falls back to: its name in capitals, dashes as
// underscores (core's options follow it for every flag; a test holds them to it).
func EnvOf(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// rule says in words what the controller accepts for a setting.
func rule(r settings.Rule) string {
	var rs []string
	switch r.Kind {
	case settings.KindBool:
		rs = append(rs, "true or false (also 1, 0, t, f)")
	case settings.KindInt:
		switch {
		case r.Min != nil && r.Max != nil:
			rs = append(rs, fmt.Sprintf("an integer from %d to %d", *r.Min, *r.Max))
		case r.Min != nil:
			rs = append(rs, fmt.Sprintf("an integer from %d", *r.Min))
		case r.Max != nil:
			rs = append(rs, fmt.Sprintf("an integer up to %d", *r.Max))
		default:
			rs = append(rs, "an integer")
		}
	case settings.KindDuration:
		d := "a positive duration (90s, 12h)"
		if r.BelowText != "" {
			d += " below " + r.BelowText
		}
		rs = append(rs, d)
	}
	if len(r.Enum) > 0 {
		rs = append(rs, "one of "+strings.Join(r.Enum, ", "))
	}
	if r.Pattern != "" {
		rs = append(rs, "matching "+r.Pattern)
	}
	if r.URL {
		rs = append(rs, "empty or an absolute http(s) URL")
	}
	if len(rs) == 0 {
		rs = append(rs, "any string")
	}
	if r.NoFallback {
		rs = append(rs, "a refused value stops the controller")
	}
	return strings.Join(rs, "; ")
}

// writeSettings lists the provider's settings: variable, values key, default and bounds.
func writeSettings(b *strings.Builder) {
	b.WriteString("\n")
	b.WriteString(wrap("The provider's settings: environment variables, which the bundle sets from values.settings. The controller checks them as it starts: a refused value is reported, naming the variable, and its setting runs on the default, unless marked as stopping the controller (exit code 2). A variable Karpenter core also reads shows core's flag: set the variable, not the flag, which reaches core only. Each in full: docs/reference/settings.md.", ""))
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
