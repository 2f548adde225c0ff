package bundle_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The documents whose shell commands TestDocCommands runs or checks: the README's install and
// docs/install.md's install, upgrade and uninstall.
var commandDocs = []string{"README.md", "docs/install.md"}

// TestDocCommands reads every command of the sh blocks of commandDocs, in order, and runs
// what runs without a cluster: every `cue` command and every `make render`, with the README's
// example values file for my-values.yaml and a digest reference for the image. Every other
// make target must exist; every file a kubectl or ko command applies must be in the checkout
// or written by a command before it in the same document (make render's install.yaml,
// make release's dist/). A command of another tool fails the test until a rule here says
// what to check for it. The kubectl steps themselves run on the simulated CKE in
// test/lifecycle (install, upgrade, uninstall) and the dev loop in hack/release's
// TestNewcomerDevLoop.
func TestDocCommands(t *testing.T) {
	values := filepath.Join(t.TempDir(), "my-values.yaml")
	if err := os.WriteFile(values, readmeValues(t), 0o644); err != nil {
		t.Fatal(err)
	}
	targets := makeTargets(t)
	for _, doc := range commandDocs {
		produced := map[string]bool{}
		ran := 0
		for _, line := range shCommands(t, doc) {
			for _, cmd := range simpleCommands(line) {
				words := shellWords(cmd)
				if len(words) == 0 {
					continue
				}
				switch words[0] {
				case "make":
					if slices.Contains(words, "render") {
						ran++
					}
					checkMake(t, doc, cmd, words[1:], targets, values, produced)
				case "cue":
					ran++
					args := substitute(words[1:], values)
					if _, stderr, ok := cueRun(t, root, args...); !ok {
						t.Errorf("%s: `%s` fails:\n%s", doc, cmd, stderr)
					}
				case "ko", "kubectl":
					for i, w := range words {
						if (w == "-f" || w == "--filename") && i+1 < len(words) {
							checkFile(t, doc, cmd, words[i+1], produced)
						}
					}
				case "export", "git", "helm", "xargs":
				default:
					t.Errorf("%s: `%s`: no rule for %s commands in TestDocCommands", doc, cmd, words[0])
				}
			}
		}
		if ran == 0 {
			t.Errorf("%s: no render command found to run", doc)
		}
	}
}

func checkMake(t *testing.T, doc, cmd string, args []string, targets map[string]bool, values string, produced map[string]bool) {
	t.Helper()
	var goals []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
			goals = append(goals, a)
		}
	}
	if len(goals) == 0 {
		goals = []string{"all"}
	}
	for _, g := range goals {
		if !targets[g] {
			t.Errorf("%s: `%s`: the Makefile has no target %s", doc, cmd, g)
		}
		switch g {
		case "release":
			for _, f := range []string{"dist/crds.yaml", "dist/karpenter.yaml", "dist/install.yaml"} {
				produced[f] = true
			}
		case "render":
			vars := []string{"IMAGE=" + digestRef}
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, "VALUES="); ok {
					if v != "my-values.yaml" {
						t.Errorf("%s: `%s`: a values file other than my-values.yaml", doc, cmd)
					}
					vars = append(vars, "VALUES="+values)
				}
			}
			out, stderr, ok := makeRender(t, vars...)
			if !ok {
				t.Errorf("%s: `%s` fails:\n%s", doc, cmd, stderr)
				continue
			}
			if b, err := os.ReadFile(out); err != nil || bytes.Contains(b, []byte("ko://")) {
				t.Errorf("%s: `%s` wrote no install.yaml, or one naming ko:// (%v)", doc, cmd, err)
			}
			produced["install.yaml"] = true
		}
	}
}

func checkFile(t *testing.T, doc, cmd, file string, produced map[string]bool) {
	t.Helper()
	if file == "-" || produced[strings.TrimSuffix(file, "/")] {
		return
	}
	if _, err := os.Stat(filepath.Join(root, file)); err != nil {
		t.Errorf("%s: `%s`: %s is neither in the checkout nor written by a command before it", doc, cmd, file)
	}
}

// substitute puts the test's values file and a pullable image in place of the docs'
// placeholders.
func substitute(args []string, values string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		switch {
		case a == "my-values.yaml":
			out[i] = values
		case strings.HasPrefix(a, "image="):
			out[i] = "image=" + digestRef
		}
	}
	return out
}

var fence = regexp.MustCompile("^(\\s*)```(\\S*)\\s*$")

// codeBlocks are the doc's fenced blocks of a language, in order, dedented.
func codeBlocks(t *testing.T, doc, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in, keep, indent := false, false, ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		m := fence.FindStringSubmatch(line)
		switch {
		case m != nil && !in:
			in, keep, indent, cur = true, m[2] == lang, m[1], nil
		case m != nil && in:
			in = false
			if keep {
				blocks = append(blocks, strings.Join(cur, "\n"))
			}
		case in:
			cur = append(cur, strings.TrimPrefix(line, indent))
		}
	}
	return blocks
}

// readmeValues is the README's example values file: its first yaml block.
func readmeValues(t *testing.T) []byte {
	t.Helper()
	blocks := codeBlocks(t, "README.md", "yaml")
	if len(blocks) == 0 {
		t.Fatal("README.md has no yaml block: the example values file is gone")
	}
	return []byte(blocks[0] + "\n")
}

// shCommands are the commands of the doc's sh blocks: comment lines dropped, except the
// `# cue export path: …` alternatives, lines continued by a backslash or a pipe joined.
func shCommands(t *testing.T, doc string) []string {
	t.Helper()
	var cmds []string
	for _, block := range codeBlocks(t, doc, "sh") {
		var cur string
		for _, line := range strings.Split(block, "\n") {
			line = strings.TrimSpace(line)
			if alt, ok := strings.CutPrefix(line, "# cue export path: "); ok {
				line = alt
			}
			if strings.HasPrefix(line, "#") || line == "" {
				continue
			}
			line = stripComment(line)
			cur += line
			switch {
			case strings.HasSuffix(cur, "\\"):
				cur = strings.TrimSuffix(cur, "\\") + " "
			case strings.HasSuffix(cur, "|"):
				cur += " "
			default:
				cmds = append(cmds, strings.TrimSpace(cur))
				cur = ""
			}
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("%s has no sh commands", doc)
	}
	return cmds
}

// stripComment drops a trailing `  # comment` outside quotes.
func stripComment(line string) string {
	quote := rune(0)
	for i, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '\'' || r == '"'):
			quote = r
		case quote == 0 && r == '#' && i > 0 && (line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimSpace(line[:i])
		}
	}
	return strings.TrimSpace(line)
}

// simpleCommands splits a command line at &&, || and pipes, and unwraps assignments of a
// command substitution (ref=$(make …), export X=$(…)) into the command they run.
func simpleCommands(line string) []string {
	var out []string
	for _, part := range regexp.MustCompile(`\s*(&&|\|\||\|)\s*`).Split(line, -1) {
		if m := regexp.MustCompile(`^(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=\$\((.*)\)$`).FindStringSubmatch(part); m != nil {
			part = m[1]
		}
		out = append(out, part)
	}
	return out
}

// shellWords splits a simple command into words, removing quotes; no expansion.
func shellWords(cmd string) []string {
	var words []string
	var cur strings.Builder
	quote, inWord := rune(0), false
	for _, r := range cmd {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// makeTargets are the Makefile's explicit targets.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	cmd := exec.Command("make", "-pRrq", "-f", "Makefile", ":")
	cmd.Dir = root
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "MAKEFLAGS=") })
	out, _ := cmd.Output() // -q exits 1 when the target is not up to date
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_./-]+):`).FindAllSubmatch(out, -1) {
		targets[string(m[1])] = true
	}
	if !targets["render"] || !targets["build"] {
		t.Fatalf("reading the Makefile's targets found %d, without render or build", len(targets))
	}
	return targets
}
