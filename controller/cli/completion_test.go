package cli_test

import (
	"flag"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/karpenter/pkg/operator/options"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cli"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
)

func script(t *testing.T, shell string) string {
	t.Helper()
	r := run("completion", shell)
	if r.code != cli.ExitOK || r.stderr != "" {
		t.Fatalf("completion %s: exit %d: %s", shell, r.code, r.stderr)
	}
	return r.stdout
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// bashComplete runs the bash script's completion function on a command line whose last word
// is being completed, and returns the words offered and whether file names were asked for
// (compopt -o default, with nothing offered).
func bashComplete(t *testing.T, words ...string) (offered []string, files bool) {
	t.Helper()
	var quoted []string
	for _, w := range words {
		quoted = append(quoted, shellQuote(w))
	}
	prog := script(t, "bash") + fmt.Sprintf(`
compopt() { echo "compopt $*" >&2; }
COMP_WORDS=(%s)
COMP_CWORD=%d
_karpenter_clevercloud
printf '%%s\n' "${COMPREPLY[@]}"
`, strings.Join(quoted, " "), len(words)-1)
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", prog)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, errOut.String())
	}
	stderr := errOut.String()
	if stderr != "" && stderr != "compopt -o default\n" {
		t.Fatalf("%q: bash says %q", words, stderr)
	}
	return strings.Fields(string(out)), stderr != ""
}

// flagsOf are the flags of a command as its help parses them, with dashes.
func flagsOf(command string) []string {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	switch command {
	case "controller":
		(&options.Options{}).AddFlags(&options.FlagSet{FlagSet: fs})
	case "preflight", "values":
		(&preflight.Options{}).AddFlags(fs, command)
	}
	var out []string
	fs.VisitAll(func(f *flag.Flag) { out = append(out, "--"+f.Name) })
	return out
}

func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash on this machine")
	}
	g := NewWithT(t)
	const bin = "karpenter-clevercloud"
	offered, _ := bashComplete(t, bin, "")
	g.Expect(offered).To(ContainElements(everyCommand), "every command in the first position")
	g.Expect(offered).To(ContainElements(flagsOf("controller")), "and the controller's flags")

	// Every command's every flag, and nothing else, once past its name.
	for _, c := range []string{"preflight", "values", "version"} {
		offered, _ := bashComplete(t, bin, c, "--")
		want := flagsOf(c)
		g.Expect(offered).To(HaveLen(len(want)), c)
		if len(want) > 0 {
			g.Expect(offered).To(ConsistOf(want), c)
		}
	}
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"pre"}, []string{"preflight"}},
		{[]string{"v"}, []string{"values", "version"}},
		{[]string{"--metrics-p"}, []string{"--metrics-port"}},
		{[]string{"values", "--f"}, []string{"--force"}},
		{[]string{"preflight", "extra", "--kube"}, []string{"--kubeconfig"}},
		{[]string{"completion", ""}, []string{"bash", "zsh"}},
		{[]string{"help", "v"}, []string{"values", "version"}},
		{[]string{"help", "values", "v"}, nil},
		{[]string{"prefligt", "--"}, nil},
	} {
		offered, files := bashComplete(t, append([]string{bin}, tc.words...)...)
		g.Expect(files).To(BeFalse(), "%q", tc.words)
		if tc.want == nil {
			g.Expect(offered).To(BeEmpty(), "%q", tc.words)
		} else {
			g.Expect(offered).To(Equal(tc.want), "%q", tc.words)
		}
	}
	// A flag's value: file names for a file, nothing (and no flag) for another.
	for _, tc := range []struct {
		words []string
		files bool
	}{
		{[]string{"values", "--output", ""}, true},
		{[]string{"values", "--output", "=", ""}, true},
		{[]string{"values", "--output", "=", "my"}, true},
		{[]string{"preflight", "--bundle", "out/"}, true},
		{[]string{"preflight", "--kubeconfig", "--"}, true},
		{[]string{"values", "--context", ""}, false},
		{[]string{"--log-level", ""}, false},
	} {
		offered, files := bashComplete(t, append([]string{bin}, tc.words...)...)
		g.Expect(offered).To(BeEmpty(), "%q", tc.words)
		g.Expect(files).To(Equal(tc.files), "%q", tc.words)
	}
}

// zsh's completion functions only run inside a completion widget, so the script runs here with
// _describe, _arguments and compdef recorded instead: what it asks of each, for a command line,
// and that it registers itself when sourced. (Driven through a real widget by hand: --ou gives
// --output=, pre gives preflight, --kubeconfig /tm gives /tmp/.)
func TestZshCompletion(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("no zsh on this machine")
	}
	g := NewWithT(t)
	s := script(t, "zsh")
	g.Expect(s).To(HavePrefix("#compdef karpenter-clevercloud\n"))
	syntax := exec.Command("zsh", "-n", "-c", s)
	out, err := syntax.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "zsh -n: %s", out)

	complete := func(prefix string, words ...string) string {
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, shellQuote(w))
		}
		prog := `
_describe() { print -r -- "describe ${(j:|:)${(P)4}}" }
_arguments() { print -r -- "arguments words=${(j: :)words} current=$CURRENT"; shift; print -rl -- "$@" }
compdef() { print -r -- "compdef $*" }
` + s + fmt.Sprintf(`
words=(%s); CURRENT=%d; PREFIX=%s
_karpenter-clevercloud
`, strings.Join(quoted, " "), len(words), shellQuote(prefix))
		out, err := exec.Command("zsh", "-f", "-c", prog).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		return string(out)
	}
	const bin = "karpenter-clevercloud"
	got := complete("pre", bin, "pre")
	g.Expect(got).To(HavePrefix("compdef _karpenter-clevercloud karpenter-clevercloud\n"), "sourced, it registers itself")
	for _, c := range everyCommand {
		g.Expect(got).To(MatchRegexp(`describe (.*\|)?`+c+`\\?:`), "the commands offer %s", c)
	}
	got = complete("--", bin, "values", "--")
	g.Expect(got).To(ContainSubstring("arguments words=values -- current=2"), "the command's own word is skipped")
	specs := strings.Split(strings.TrimRight(got[strings.Index(got, "current=2\n")+len("current=2\n"):], "\n"), "\n")
	var names []string
	for _, spec := range specs {
		g.Expect(spec).To(MatchRegexp(`^--[a-z-]+(\[[^\]]*\]|=\[[^\]]*\]:[a-z-]+:(_files| ))$`), "an _arguments spec")
		names = append(names, spec[:strings.IndexAny(spec, "=[")])
	}
	g.Expect(names).To(ConsistOf(flagsOf("values")))
	g.Expect(specs).To(ContainElement("--output=[file to write the values to]:output:_files"))
	g.Expect(specs).To(ContainElement("--force[replace the output file if it exists]"))
	g.Expect(specs).To(ContainElement(MatchRegexp(`^--context=\[.*\]:context: $`)), "no completion for a context's name")

	got = complete("--", bin, "--")
	g.Expect(got).To(ContainSubstring("arguments words=karpenter-clevercloud -- current=2"), "a flag first is the controller's")
	g.Expect(got).To(ContainSubstring("--metrics-port=["))
	got = complete("", bin, "completion", "")
	g.Expect(got).To(ContainSubstring("1:completion:(bash zsh)"))
	g.Expect(slices.Contains(strings.Split(got, "\n"), "1:help:("+strings.Join(everyCommand, " ")+")")).To(BeFalse())
	got = complete("", bin, "help", "")
	g.Expect(strings.Split(got, "\n")).To(ContainElement("1:help:(" + strings.Join(everyCommand, " ") + ")"))
}
