package bundle_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The documents whose shell commands TestDocCommands runs: the README's install, then
// docs/install.md's install, upgrade and uninstall, as the reader who followed the README reads
// it (same home directory, same checkout, a new shell).
var commandDocs = []string{"README.md", "docs/install.md"}

// docRule is what TestDocCommands does with a simple command of the docs: run it (skip empty),
// or not, for the reason given. Every command the docs give must meet a rule: a new tool in the
// docs fails the test until a rule here says whether it can run without a cluster.
type docRule struct {
	match func(words []string) bool
	skip  string
}

func first(name string, subs ...string) func([]string) bool {
	return func(w []string) bool {
		if len(w) == 0 || w[0] != name {
			return false
		}
		if len(subs) == 0 {
			return true
		}
		for _, a := range w[1:] {
			if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
				return slices.Contains(subs, a)
			}
		}
		return false
	}
}

// makeGoal matches a make command with one of the goals.
func makeGoal(goals ...string) func([]string) bool {
	return func(w []string) bool {
		return len(w) > 0 && w[0] == "make" && slices.ContainsFunc(makeGoals(w[1:]), func(g string) bool { return slices.Contains(goals, g) })
	}
}

const (
	needsCluster  = "needs a cluster"
	needsRegistry = "pushes to a registry"
)

// docRules, first match wins. A skipped command that assigns its output (ref=$(make -s
// image …)) gives the variable a stand-in image by digest, so what follows runs on it as on
// the image the reader built.
var docRules = []docRule{
	{first("kubectl"), needsCluster},
	{first("helm"), needsCluster},
	{first("xargs"), needsCluster + " (it feeds kubectl)"},
	{first("karpenter-clevercloud", "preflight", "values", "status", "explain"), needsCluster + " (reads it through the kubeconfig)"},
	{first("karpenter-clevercloud"), ""},
	{first("ko"), needsRegistry + " and applies to a cluster; hack/release's TestNewcomerDevLoop runs the README's dev loop with ko resolve on a loopback registry"},
	{makeGoal("image", "base"), needsRegistry + "; hack/release's tests run it on a loopback registry"},
	{makeGoal("release"), needsRegistry + " and files CHANGELOG.md (maintainers only); hack/release's tests run it"},
	{makeGoal("dev", "run"), needsCluster + " (and a registry); TestMakeDev runs make dev with a stand-in ko"},
	{func(w []string) bool {
		return makeGoal("bundle")(w) && !slices.ContainsFunc(w, func(a string) bool { return strings.HasPrefix(a, "IMAGE=") })
	}, needsRegistry + " (builds the image first); with IMAGE it runs here"},
	{makeGoal("test", "e2e", "conformance", "performance", "bench"), "the project's own suites, tens of minutes: not an install step (and make test runs this test)"},
	{makeGoal("verify"), "regenerates and compares the whole tree, CI's check: not an install step"},
	{makeGoal("demo"), "runs the simulated CKE for minutes after a 10-minute first build: the e2e suites run the same stack"},
	{first("make"), ""},
	{first("cue"), ""},
	{first("export"), ""},
	{first("mkdir"), ""},
	{first("cat"), ""},
	{first("ls"), ""},
	{first("cp"), ""},
	{func(w []string) bool { return len(w) == 1 && assignment.MatchString(w[0]) }, ""},
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// docStep is one command of a doc: its text as written (lines joined, heredoc included) and
// what the test does with it.
type docStep struct {
	text, skip string
	// run is what the shell runs in its place: the text, a stand-in assignment, the render part
	// of a pipe into kubectl, or checks that the files a skipped kubectl would read exist.
	run string
}

// TestDocCommands follows README.md and docs/install.md literally, in a fresh shell each, in a
// copy of the working tree (so `make tools build` builds as on a fresh clone and nothing in the
// checkout moves): every command that needs no cluster and no registry runs as written, in
// order, and must succeed; the others are skipped with their rule's reason, logged, and a
// kubectl that reads files (-f) still has them checked to exist at that point. The kubectl
// steps themselves run on the simulated CKE in test/lifecycle.
func TestDocCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the tools and the controller in a copy of the checkout")
	}
	targets := makeTargets(t)
	tree := copyWorkingTree(t)
	home := t.TempDir()
	env := freshEnv(t, home)
	ran := map[string]int{}
	for _, doc := range commandDocs {
		steps := docSteps(t, doc)
		for _, s := range steps {
			for _, cmd := range simpleCommands(s.text) {
				w := shellWords(stripComment(cmd))
				if len(w) > 0 && w[0] == "make" {
					for _, g := range makeGoals(w[1:]) {
						if !targets[g] {
							t.Errorf("%s: `%s`: the Makefile has no target %s", doc, s.text, g)
						}
					}
				}
			}
			if s.skip != "" {
				t.Logf("%s: skipped `%s`: %s", doc, firstLine(s.text), s.skip)
			}
			if s.run != "" && s.skip == "" {
				ran[doc]++
			}
		}
		runSteps(t, doc, tree, env, steps)
	}
	for _, doc := range commandDocs {
		if ran[doc] < 3 {
			t.Errorf("%s: only %d commands ran: the rules skip what they should run", doc, ran[doc])
		}
	}

	// The README's path, followed to the point that needs a cluster, left a bundle for the
	// stand-in image with the README's values file in it.
	install := readFileT(t, filepath.Join(home, "karpenter-clevercloud", "bundle", "install.yaml"))
	dep := decodeDeployment(t, install)
	if got := dep.Spec.Template.Spec.Containers[0].Image; got != digestRef {
		t.Errorf("the README's bundle runs %q, want the image the reader gave, %q", got, digestRef)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("the README's bundle has replicas %v, want its values file's 2", dep.Spec.Replicas)
	}
	if !bytes.Contains(install, []byte("CLEVER_CLOUD_QUOTA_CPU")) || !bytes.Contains(install, []byte(`value: "80"`)) {
		t.Error("the README's bundle does not carry its values file's quota of 80 vCPU")
	}
}

// runSteps runs a doc's steps in one new bash, in order, stopping at the first that fails.
func runSteps(t *testing.T, doc, dir string, env []string, steps []docStep) {
	t.Helper()
	mark := filepath.Join(t.TempDir(), "step")
	var script strings.Builder
	script.WriteString("set -eo pipefail\n")
	for i, s := range steps {
		if s.run == "" {
			continue
		}
		fmt.Fprintf(&script, "echo %d >%q\n%s\n", i, mark, s.run)
	}
	script.WriteString("echo done >" + strconv.Quote(mark) + "\n")
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", script.String())
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	b, _ := os.ReadFile(mark) // absent when the shell stopped before the first step
	last := strings.TrimSpace(string(b))
	if err == nil && last == "done" {
		return
	}
	i, convErr := strconv.Atoi(last)
	if convErr != nil {
		t.Fatalf("%s: the shell stopped (%v) before any step:\n%s", doc, err, out)
	}
	t.Fatalf("%s: `%s` fails as written (%v):\n%s", doc, steps[i].text, err, out)
}

// docSteps are the commands of the doc's sh blocks, classified by docRules.
func docSteps(t *testing.T, doc string) []docStep {
	t.Helper()
	var steps []docStep
	for _, text := range shCommands(t, doc) {
		steps = append(steps, classify(t, doc, text))
	}
	return steps
}

var standInAssign = regexp.MustCompile(`^((?:export\s+)?[A-Za-z_][A-Za-z0-9_]*)=\$\(.*\)$`)

func classify(t *testing.T, doc, text string) docStep {
	t.Helper()
	s := docStep{text: text, run: text}
	stages := pipeStages(text)
	reasons := make([]string, len(stages))
	for i, stage := range stages {
		for _, cmd := range simpleCommands(stage) {
			w := shellWords(stripComment(cmd))
			if len(w) == 0 {
				continue
			}
			r := ruleFor(w)
			if r == nil {
				t.Errorf("%s: `%s`: no rule for %s commands in TestDocCommands", doc, firstLine(text), w[0])
				s.run = ""
				return s
			}
			if r.skip != "" && reasons[i] == "" {
				reasons[i] = r.skip
			}
		}
	}
	last := len(stages) - 1
	switch {
	case !slices.ContainsFunc(reasons, func(r string) bool { return r != "" }):
		return s
	case last > 0 && reasons[last] != "" && !slices.ContainsFunc(reasons[:last], func(r string) bool { return r != "" }):
		// A render piped into kubectl: the render runs, its output goes nowhere.
		s.skip = reasons[last]
		s.run = strings.Join(stages[:last], " | ") + " >/dev/null"
		return s
	}
	s.skip = slices.DeleteFunc(slices.Clone(reasons), func(r string) bool { return r == "" })[0]
	if m := standInAssign.FindStringSubmatch(strings.TrimSpace(stripComment(text))); m != nil {
		s.run = m[1] + "=" + digestRef
		return s
	}
	s.run = fileChecks(text)
	return s
}

// fileChecks are the checks that the files a skipped command reads (-f FILE) exist, written so
// the shell expands them as it would have for the command; nothing when it reads none.
func fileChecks(text string) string {
	var checks []string
	for _, cmd := range simpleCommands(text) {
		words := rawWords(stripComment(cmd))
		for i, w := range words {
			if (w == "-f" || w == "--filename") && i+1 < len(words) && words[i+1] != "-" {
				f := words[i+1]
				checks = append(checks, fmt.Sprintf("test -e %s || { echo %s: no such file, read by a command the doc gives; exit 1; }", f, strconv.Quote(f)))
			}
		}
	}
	return strings.Join(checks, "\n")
}

func ruleFor(words []string) *docRule {
	for i := range docRules {
		if docRules[i].match(words) {
			return &docRules[i]
		}
	}
	return nil
}

func makeGoals(args []string) []string {
	var goals []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
			goals = append(goals, a)
		}
	}
	if len(goals) == 0 {
		goals = []string{"all"}
	}
	return goals
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
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

var heredoc = regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_]+)['"]?`)

// shCommands are the commands of the doc's sh blocks as written: comment lines dropped, except
// the `# cue export path: …` alternatives, lines continued by a backslash or a pipe kept with
// their continuation, a heredoc kept with its body.
func shCommands(t *testing.T, doc string) []string {
	t.Helper()
	var cmds []string
	for _, block := range codeBlocks(t, doc, "sh") {
		var cur []string
		lines := strings.Split(block, "\n")
		for i := 0; i < len(lines); i++ {
			line := strings.TrimSpace(lines[i])
			if alt, ok := strings.CutPrefix(line, "# cue export path: "); ok {
				line = alt
			}
			if len(cur) == 0 && (strings.HasPrefix(line, "#") || line == "") {
				continue
			}
			cur = append(cur, line)
			if m := heredoc.FindStringSubmatch(stripComment(line)); m != nil {
				for i++; i < len(lines) && lines[i] != m[1]; i++ {
					cur = append(cur, lines[i])
				}
				if i == len(lines) {
					t.Fatalf("%s: the heredoc of `%s` has no %s line", doc, line, m[1])
				}
				cur = append(cur, m[1])
			}
			stripped := stripComment(line)
			if strings.HasSuffix(stripped, "\\") || strings.HasSuffix(stripped, "|") {
				continue
			}
			cmds = append(cmds, strings.Join(cur, "\n"))
			cur = nil
		}
		if cur != nil {
			t.Fatalf("%s: a command runs off the end of its block: %q", doc, cur)
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

// commandText is a command's first line with continuations joined and comments dropped: a
// heredoc's body is data, not commands.
func commandText(text string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		line = stripComment(line)
		b.WriteString(strings.TrimSuffix(line, "\\"))
		b.WriteString(" ")
		if heredoc.MatchString(line) {
			break
		}
	}
	return strings.TrimSpace(b.String())
}

// pipeStages splits a command at its pipes (not ||), outside quotes.
func pipeStages(text string) []string {
	return splitOutsideQuotes(commandText(text), func(s string, i int) int {
		if s[i] == '|' && !strings.HasPrefix(s[i:], "||") && (i == 0 || s[i-1] != '|') {
			return 1
		}
		return 0
	})
}

// simpleCommands splits a command at &&, || and pipes outside quotes, and unwraps assignments
// of a command substitution (ref=$(make …), export X=$(…)) into the command they run.
func simpleCommands(text string) []string {
	var out []string
	parts := splitOutsideQuotes(commandText(text), func(s string, i int) int {
		switch {
		case strings.HasPrefix(s[i:], "&&"), strings.HasPrefix(s[i:], "||"):
			return 2
		case s[i] == '|':
			return 1
		}
		return 0
	})
	for _, part := range parts {
		if m := standInAssign.FindStringSubmatch(part); m != nil {
			part = strings.TrimSuffix(strings.TrimPrefix(part[len(m[1])+1:], "$("), ")")
		}
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}

// splitOutsideQuotes cuts s where sep, outside quotes, says a separator of that many bytes
// starts, and trims the pieces.
func splitOutsideQuotes(s string, sep func(s string, i int) int) []string {
	var parts []string
	quote, start := byte(0), 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		default:
			if n := sep(s, i); n > 0 {
				parts = append(parts, strings.TrimSpace(s[start:i]))
				i += n - 1
				start = i + 1
			}
		}
	}
	return append(parts, strings.TrimSpace(s[start:]))
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

// rawWords splits a simple command into words as written, quotes kept, for the shell to expand.
func rawWords(cmd string) []string {
	var words []string
	var cur strings.Builder
	quote := rune(0)
	for _, r := range cmd {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote = r
			cur.WriteRune(r)
		case r == ' ' || r == '\t':
			if cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
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

// copyWorkingTree copies the checkout's files as they are now (tracked and new, not ignored:
// no bin/, no dist/) into a new directory: a fresh clone of the working tree, without .git.
func copyWorkingTree(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := t.TempDir()
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, rel)
		fi, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(link, to); err != nil {
				t.Fatal(err)
			}
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dst
}

// freshEnv is a new login's environment: PATH without the checkout's bin/, no GOTOOLCHAIN, no
// make, ko or kubectl settings, a home of its own, and a kubeconfig that reaches nothing, so a
// command wrongly run cannot touch a cluster. Go's caches stay this machine's, as a reader's
// would be theirs.
func freshEnv(t *testing.T, home string) []string {
	t.Helper()
	var path []string
	for _, p := range filepath.SplitList(os.Getenv("PATH")) {
		if abs, err := filepath.Abs(p); err == nil && !strings.HasPrefix(abs, root+string(filepath.Separator)) {
			path = append(path, p)
		}
	}
	env := []string{
		"HOME=" + home,
		"PATH=" + strings.Join(path, string(filepath.ListSeparator)),
		"KUBECONFIG=" + filepath.Join(home, "no-cluster"),
		"TMPDIR=" + os.TempDir(),
		"LANG=C.UTF-8",
	}
	for _, v := range []string{"GOPATH", "GOMODCACHE", "GOCACHE", "GOPROXY", "GONOSUMDB", "GOSUMDB", "GOPRIVATE"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", v, err)
		}
		if val := strings.TrimSpace(string(out)); val != "" {
			env = append(env, v+"="+val)
		}
	}
	return env
}
