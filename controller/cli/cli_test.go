package cli_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/karpenter/pkg/operator/options"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cli"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/version"
)

// result is one command line's outcome.
type result struct {
	code           int
	coreArgs       []string
	start          bool
	stdout, stderr string
}

func run(args ...string) result {
	var out, errOut bytes.Buffer
	code, coreArgs, start := cli.Run(context.Background(), args, &out, &errOut)
	return result{code, coreArgs, start, out.String(), errOut.String()}
}

// noKubeconfig points the kubeconfig flags at a file that does not exist, so that a command
// line the CLI accepts fails at the kubeconfig, after everything checked before it.
func noKubeconfig(t *testing.T) string {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	return filepath.Join(t.TempDir(), "no-kubeconfig")
}

var everyCommand = []string{"controller", "preflight", "values", "status", "explain", "version", "completion", "help"}

// --help, -h and help print the usage and start nothing: every command, and every one of the
// provider's settings with its variable, values key, default and bounds as controller/settings
// declares them.
func TestHelpListsEveryCommandAndSetting(t *testing.T) {
	g := NewWithT(t)
	var first string
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}} {
		r := run(args...)
		g.Expect(r.code).To(Equal(cli.ExitOK), "%v", args)
		g.Expect(r.start).To(BeFalse(), "%v starts the controller", args)
		g.Expect(r.stderr).To(BeEmpty(), "%v", args)
		if first == "" {
			first = r.stdout
		}
		g.Expect(r.stdout).To(Equal(first), "%v prints another usage than %v", args, "--help")
	}
	for _, c := range everyCommand {
		g.Expect(first).To(MatchRegexp(`(?m)^  karpenter-clevercloud \[?`+c+`\b`), "the usage lists %s", c)
	}
	g.Expect(first).To(ContainSubstring("help controller' lists Karpenter core's flags"))
	n := 0
	settings.Walk(func(f settings.Field) {
		n++
		entry := regexp.MustCompile(`(?m)^  ` + f.Env + ` \(([^)]*)\)\n((?:        .*\n)+)`).FindStringSubmatch(first)
		if entry == nil {
			t.Errorf("the usage does not list %s", f.Env)
			return
		}
		if f.Tag.Get("json") != "-" {
			g.Expect(entry[1]).To(HavePrefix("settings."+f.Path), f.Env)
		}
		body := strings.Join(strings.Fields(entry[2]), " ")
		def := f.Default
		if def == "" {
			def = "empty"
		}
		g.Expect(body).To(ContainSubstring("default "+def+";"), f.Env)
		for _, bound := range []string{"min", "max", "below"} {
			if v, ok := f.Tag.Lookup(bound); ok {
				g.Expect(body).To(ContainSubstring(v), "%s's %s", f.Env, bound)
			}
		}
	}, &settings.Settings{})
	g.Expect(n).To(BeNumerically(">", 10), "settings.Walk found the settings")
}

// help NAME and NAME --help print the same help; each lists the command's flags, the
// controller's Karpenter core's flags and the provider's settings.
func TestCommandHelp(t *testing.T) {
	g := NewWithT(t)
	want := map[string][]string{
		"controller": {"--metrics-port int", "--log-level string", "--feature-gates string", "--disable-leader-election", "METRICS_PORT (settings.metricsPort, core's --metrics-port)", "NODEGROUP_LAUNCH_GIVE_UP_AFTER"},
		"preflight":  {"--kubeconfig string", "--context string", "--namespace string", "--bundle string", "--timeout duration", "1: a check failed"},
		"values":     {"--output string", "--image string", "--force", "(default karpenter-values.yaml)", "never replaced without --force"},
		"version":    {"Prints the version"},
		"completion": {"bash|zsh", "source <(karpenter-clevercloud completion bash)"},
		"help":       {"Usage: karpenter-clevercloud help [command]"},
	}
	for _, c := range everyCommand {
		viaHelp := run("help", c)
		g.Expect(viaHelp.code).To(Equal(cli.ExitOK), c)
		g.Expect(viaHelp.start).To(BeFalse(), c)
		for _, s := range want[c] {
			g.Expect(viaHelp.stdout).To(ContainSubstring(s), c)
		}
		for _, h := range []string{"--help", "-h"} {
			viaFlag := run(c, h)
			g.Expect(viaFlag.code).To(Equal(cli.ExitOK), "%s %s", c, h)
			g.Expect(viaFlag.stdout).To(Equal(viaHelp.stdout), "%s %s", c, h)
		}
	}
	g.Expect(run("help", "values").stdout).NotTo(ContainSubstring("--bundle"), "values has no --bundle")
	// A controller command line with --help anywhere prints the controller's help.
	r := run("--log-level", "debug", "--help")
	g.Expect(r.start).To(BeFalse())
	g.Expect(r.stdout).To(HavePrefix("Usage: karpenter-clevercloud [controller] [flags]"))
}

// A command line a command would not read as written is refused, naming what is wrong; the
// controller's before it starts. preflight refuses with 1, not 2, which means "warnings".
func TestStrictCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"prefligt"}, cli.ExitUsage, `unknown command "prefligt" (did you mean preflight?)`},
		{[]string{"deploy"}, cli.ExitUsage, `unknown command "deploy": want one of`},
		{[]string{"statsu"}, cli.ExitUsage, `unknown command "statsu" (did you mean status?)`},
		{[]string{"status", "extra"}, cli.ExitUsage, `unexpected argument "extra" (status takes no arguments)`},
		{[]string{"status", "--output", "yaml"}, cli.ExitUsage, `--output "yaml": want text or json`},
		{[]string{"explain"}, cli.ExitUsage, "which pod?"},
		{[]string{"explain", "a", "b"}, cli.ExitUsage, `unexpected argument "b" (explain takes one pod at most)`},
		{[]string{"explain", "a", "-o", "yaml"}, cli.ExitUsage, `--output "yaml": want text or json`},
		{[]string{"values", "--kubconfig", "X"}, cli.ExitUsage, "unknown flag --kubconfig (did you mean --kubeconfig?)"},
		{[]string{"--metric-port", "9000"}, cli.ExitUsage, "unknown flag --metric-port (did you mean --metrics-port?)"},
		{[]string{"preflight", "--no-such-flag"}, preflight.ExitFail, "unknown flag --no-such-flag"},
		{[]string{"preflight", "extra", "--kubeconfig", "X"}, preflight.ExitFail, `unexpected argument "extra"`},
		{[]string{"preflight", "--kubeconfig"}, preflight.ExitFail, "flag needs an argument: --kubeconfig"},
		{[]string{"values", "--no-such-flag"}, cli.ExitUsage, "unknown flag --no-such-flag"},
		{[]string{"values", "--timeout", "soon"}, cli.ExitUsage, `invalid value "soon" for flag --timeout`},
		{[]string{"values", "a", "b"}, cli.ExitUsage, `unexpected argument "a b"`},
		{[]string{"version", "now"}, cli.ExitUsage, `unexpected argument "now"`},
		{[]string{"completion"}, cli.ExitUsage, "which shell?"},
		{[]string{"completion", "fish"}, cli.ExitUsage, `unknown shell "fish"`},
		{[]string{"completion", "bash", "zsh"}, cli.ExitUsage, `unexpected argument "zsh"`},
		{[]string{"help", "nope"}, cli.ExitUsage, `unknown command "nope"`},
		{[]string{"--no-such-flag"}, cli.ExitUsage, "unknown flag --no-such-flag"},
		{[]string{"--metrics-port", "x"}, cli.ExitUsage, `invalid value "x" for flag --metrics-port`},
		{[]string{"--metrics-port", "9000", "extra"}, cli.ExitUsage, `unexpected argument "extra"`},
		{[]string{"controller", "--enable-profiling", "false"}, cli.ExitUsage, `unexpected argument "false"`},
		{[]string{"--", "extra"}, cli.ExitUsage, `unexpected argument "extra"`},
	} {
		r := run(tc.args...)
		if r.code != tc.code || r.start || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%q: exit %d (start %t), stderr %q; want exit %d saying %q", tc.args, r.code, r.start, r.stderr, tc.code, tc.says)
		}
		if r.stdout != "" {
			t.Errorf("%q: wrote %q to standard output", tc.args, r.stdout)
		}
	}
}

// Flags after an argument are read: the flag package alone stops at the first argument, and
// `preflight extra --kubeconfig X` read the default kubeconfig.
func TestFlagsAfterArguments(t *testing.T) {
	g := NewWithT(t)
	missing := noKubeconfig(t)
	r := run("values", "--output", "-", "--kubeconfig", missing)
	g.Expect(r.code).To(Equal(preflight.ExitFail))
	g.Expect(r.stderr).To(ContainSubstring(missing), "the kubeconfig given is the one read")
	r = run("completion", "bash", "--help")
	g.Expect(r.code).To(Equal(cli.ExitOK))
	g.Expect(r.stdout).To(HavePrefix("Usage: karpenter-clevercloud completion bash|zsh"))
	// After --, everything is an argument.
	r = run("completion", "--", "--help")
	g.Expect(r.code).To(Equal(cli.ExitUsage))
	g.Expect(r.stderr).To(ContainSubstring(`unknown shell "--help"`))
}

// The controller's command line goes to Karpenter core as core parses it, without the
// optional word controller; core reads the flags given.
func TestControllerCommandLine(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct{ args, core []string }{
		{nil, nil},
		{[]string{"controller"}, []string{}},
		{[]string{"controller", "--metrics-port", "9000"}, []string{"--metrics-port", "9000"}},
		{[]string{"--metrics-port=9000", "--enable-profiling"}, []string{"--metrics-port=9000", "--enable-profiling"}},
	} {
		r := run(tc.args...)
		g.Expect(r.start).To(BeTrue(), "%q", tc.args)
		g.Expect(r.stdout + r.stderr).To(BeEmpty())
		g.Expect(r.coreArgs).To(HaveLen(len(tc.core)), "%q", tc.args)
		if len(tc.core) > 0 {
			g.Expect(r.coreArgs).To(Equal(tc.core))
			o := &options.Options{}
			fs := &options.FlagSet{FlagSet: flag.NewFlagSet("karpenter", flag.ContinueOnError)}
			o.AddFlags(fs)
			g.Expect(o.Parse(fs, r.coreArgs...)).To(Succeed())
			g.Expect(o.MetricsPort).To(Equal(9000))
		}
	}
}

func TestVersion(t *testing.T) {
	g := NewWithT(t)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := run(args...)
		g.Expect(r.code).To(Equal(cli.ExitOK))
		g.Expect(r.stdout).To(Equal(version.Version + "\n"))
	}
}

// values refuses, before reading the cluster, to replace a file without --force, and an
// image a cluster cannot pull.
func TestValuesRefusesBeforeReading(t *testing.T) {
	g := NewWithT(t)
	missing := noKubeconfig(t)
	existing := filepath.Join(t.TempDir(), "karpenter-values.yaml")
	g.Expect(os.WriteFile(existing, []byte("replicas: 3 # mine\n"), 0o644)).To(Succeed())

	r := run("values", "--output", existing, "--kubeconfig", missing)
	g.Expect(r.code).To(Equal(preflight.ExitFail))
	g.Expect(r.stderr).To(ContainSubstring(existing + " exists: pass --force to replace it"))
	g.Expect(r.stderr).NotTo(ContainSubstring("kubeconfig"), "refused before reading the cluster")
	b, err := os.ReadFile(existing)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal("replicas: 3 # mine\n"))

	r = run("values", "--output", existing, "--force", "--kubeconfig", missing)
	g.Expect(r.code).To(Equal(preflight.ExitFail))
	g.Expect(r.stderr).To(ContainSubstring("loading the kubeconfig"), "--force goes on to read the cluster")

	r = run("values", "--image", "karpenter:v1", "--output", "-", "--kubeconfig", missing)
	g.Expect(r.code).To(Equal(preflight.ExitFail))
	g.Expect(r.stderr).To(ContainSubstring("--image: karpenter:v1 names no registry host"))

	r = run("values", "--image", "registry.example.com/karpenter@sha256:0123", "--output", "-", "--kubeconfig", missing)
	g.Expect(r.stderr).To(ContainSubstring("loading the kubeconfig"), "a pinned image with a host is accepted")
}

// The image rules are make render's (hack/render.sh): the same references pass and fail.
func TestCheckImage(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.example.com/karpenter/controller@sha256:abc": "",
		"registry.example.com/karpenter/controller:v1.2.3":     "",
		"localhost/karpenter:dev":                              "",
		"localhost:5000/karpenter:dev":                         "",
		"":                                                     "empty",
		"ko://github.com/CleverCloud/karpenter-provider-clever-cloud/controller": "ko import path",
		"registry.example.com/karpenter :v1":                                     "whitespace",
		"karpenter:v1":                                                           "names no registry host",
		"library/karpenter:v1":                                                   "names no registry host",
		"registry.example.com/karpenter":                                         "neither a digest nor a tag",
		"registry.example.com:5000/karpenter":                                    "neither a digest nor a tag",
	} {
		err := preflight.CheckImage(ref)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q refused: %v", ref, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want an error saying %q", ref, err, want)
		}
	}
}

// The settings the help lists are controller/settings' own: every field, in its order, with
// its default; the rules and core's flags as the tags and core's flag set give them.
func TestSettingsFromTheSettingsPackage(t *testing.T) {
	g := NewWithT(t)
	var fields []settings.Field
	settings.Walk(func(f settings.Field) { fields = append(fields, f) }, &settings.Settings{})
	got := cli.Settings()
	g.Expect(got).To(HaveLen(len(fields)))
	byEnv := map[string]cli.Setting{}
	for i, s := range got {
		g.Expect(s.Env).To(Equal(fields[i].Env))
		g.Expect(s.Default).To(Equal(fields[i].Default))
		byEnv[s.Env] = s
	}
	g.Expect(byEnv["METRICS_PORT"]).To(Equal(cli.Setting{Env: "METRICS_PORT", Key: "settings.metricsPort", Kind: "integer", Default: "8080", Rule: "an integer from 1 to 65535", CoreFlag: "--metrics-port"}))
	g.Expect(byEnv["NODEGROUP_LAUNCH_GIVE_UP_AFTER"].Rule).To(Equal("a positive duration (90s, 12h) below 15m"))
	g.Expect(byEnv["PRICING_REFRESH_ENABLED"].Rule).To(Equal("true or false (also 1, 0, t, f)"))
	g.Expect(byEnv["LOG_LEVEL"].Rule).To(Equal("one of debug, info, error"))
	g.Expect(byEnv["PRICING_API_URL"].Rule).To(Equal("empty or an absolute http(s) URL"))
	g.Expect(byEnv["FLAVORS_CONFIG_PATH"].Key).To(BeEmpty(), "the bundle sets it; no values key")
	g.Expect(byEnv["NODEGROUP_ACCEPTANCE_TIMEOUT"].CoreFlag).To(BeEmpty(), "core does not read it")
	g.Expect(byEnv["CLEVER_CLOUD_REGION"].Rule).To(HaveSuffix("; a refused value stops the controller"))
	g.Expect(byEnv["LOG_LEVEL"].Rule).NotTo(ContainSubstring("stops"))
}

// Every field of settings.Rule is one the help puts in words: a constraint added to the rule
// fails here until the help says it.
func TestEveryRuleFieldIsDescribed(t *testing.T) {
	for f := range reflect.TypeFor[settings.Rule]().Fields() {
		if !cli.RuleFields[f.Name] {
			t.Errorf("settings.Rule.%s is not described by the help's rule", f.Name)
		}
	}
}

// Every Karpenter core flag falls back to the variable EnvOf names: the help says so, and names
// core's flag beside a provider setting of the same variable by it.
func TestCoreFlagsFallBackToTheVariableTheirNameSpells(t *testing.T) {
	register := func() *options.Options {
		o := &options.Options{}
		o.AddFlags(&options.FlagSet{FlagSet: flag.NewFlagSet("karpenter", flag.ContinueOnError)})
		return o
	}
	fs := &options.FlagSet{FlagSet: flag.NewFlagSet("karpenter", flag.ContinueOnError)}
	(&options.Options{}).AddFlags(fs)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		env := cli.EnvOf(f.Name)
		t.Setenv(env, "")
		os.Unsetenv(env)
		base := register()
		found := false
		for _, probe := range []string{"true", "false", "7777", "7m7s", "cli-probe", "NodeRepair=true"} {
			t.Setenv(env, probe)
			if !reflect.DeepEqual(base, register()) {
				found = true
				break
			}
		}
		os.Unsetenv(env)
		if !found {
			t.Errorf("--%s: setting %s changes nothing core reads", f.Name, env)
		}
	})
	if n == 0 {
		t.Fatal("core registered no flag")
	}
}
