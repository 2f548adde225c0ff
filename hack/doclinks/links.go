package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"iter"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Problem is a link that does not resolve, where it is written.
type Problem struct {
	File   string // relative to the root, slash-separated
	Line   int
	Target string
	Why    string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Target, p.Why)
}

// Documents are the Markdown files a reader follows links between: the README, the changelog,
// and everything under docs/ and examples/.
func Documents(root string) ([]string, error) {
	docs := []string{"README.md", "CHANGELOG.md"}
	for _, dir := range []string{"docs", "examples"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(p, ".md") {
				rel, err := filepath.Rel(root, p)
				if err != nil {
					return err
				}
				docs = append(docs, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// Check reads every document and reports each relative link whose file is missing, or whose
// #anchor names no heading (nor explicit anchor) of the Markdown file it points into.
func Check(root string, docs []string) ([]Problem, error) {
	anchors := map[string]map[string]bool{} // by slash path relative to root
	anchorsOf := func(rel string) (map[string]bool, error) {
		if a, ok := anchors[rel]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		a := Anchors(b)
		anchors[rel] = a
		return a, nil
	}
	var problems []Problem
	for _, doc := range docs {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
		if err != nil {
			return nil, err
		}
		for _, l := range Links(b) {
			target := l.Target
			if isExternal(target) {
				continue
			}
			p, frag, _ := strings.Cut(target, "#")
			p, err := url.PathUnescape(p)
			if err != nil {
				problems = append(problems, Problem{doc, l.Line, target, "the path is not a valid URL path"})
				continue
			}
			rel := doc
			if p != "" {
				if strings.HasPrefix(p, "/") {
					// GitHub resolves a leading slash against the repository's root.
					rel = path.Clean(strings.TrimPrefix(p, "/"))
				} else {
					rel = path.Clean(path.Join(path.Dir(doc), p))
				}
				if rel == ".." || strings.HasPrefix(rel, "../") {
					problems = append(problems, Problem{doc, l.Line, target, "points outside the repository"})
					continue
				}
				fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
				if err != nil {
					problems = append(problems, Problem{doc, l.Line, target, "no such file or directory"})
					continue
				}
				if fi.IsDir() {
					if frag != "" {
						problems = append(problems, Problem{doc, l.Line, target, "an anchor on a directory"})
					}
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(rel, ".md") {
				continue // anchors into code (#L10) are GitHub's line numbers, not headings
			}
			a, err := anchorsOf(rel)
			if err != nil {
				return nil, err
			}
			if !a[frag] {
				problems = append(problems, Problem{doc, l.Line, target, "no heading of " + rel + " has this anchor" + suggest(frag, a)})
			}
		}
	}
	return problems, nil
}

// suggest names the anchor closest to a missing one, when one shares its first word.
func suggest(frag string, anchors map[string]bool) string {
	word, _, _ := strings.Cut(frag, "-")
	var close []string
	for a := range anchors {
		if strings.HasPrefix(a, word) {
			close = append(close, a)
		}
	}
	if len(close) == 0 {
		return ""
	}
	slices.Sort(close)
	if len(close) > 3 {
		close = close[:3]
	}
	return " (perhaps #" + strings.Join(close, ", #") + ")"
}

var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

func isExternal(target string) bool {
	return scheme.MatchString(target) || strings.HasPrefix(target, "//")
}

// Link is a link's target and the line it is written on.
type Link struct {
	Line   int
	Target string
}

var (
	fenceRE = regexp.MustCompile("^\\s*(```+|~~~+)")
	// An inline link or image: ](target) or ](target "title"); the target may be <…>.
	inlineRE = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	// A reference definition: [label]: target
	refDefRE = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	hrefRE   = regexp.MustCompile(`<a\s[^>]*href="([^"]+)"`)
	codeRE   = regexp.MustCompile("`+[^`]*`+")
)

// prose yields the Markdown's lines outside fenced code blocks, numbered from 1: a link or a
// heading inside a fence is an example, not part of the document.
func prose(md []byte) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		inFence, fence := false, ""
		sc := bufio.NewScanner(bytes.NewReader(md))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if m := fenceRE.FindStringSubmatch(line); m != nil {
				switch {
				case !inFence:
					inFence, fence = true, m[1][:1]
				case strings.HasPrefix(m[1], fence):
					inFence = false
				}
				continue
			}
			if !inFence && !yield(n, line) {
				return
			}
		}
	}
}

// Links are the Markdown's link targets outside code blocks and code spans.
func Links(md []byte) []Link {
	var links []Link
	for n, line := range prose(md) {
		line = codeRE.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineRE.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refDefRE.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, m := range hrefRE.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			links = append(links, Link{n, strings.TrimSuffix(strings.TrimPrefix(t, "<"), ">")})
		}
	}
	return links
}

var (
	headingRE  = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	explicitRE = regexp.MustCompile(`<a\s[^>]*(?:name|id)="([^"]+)"`)
	linkTextRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	tagRE      = regexp.MustCompile(`<[^>]+>`)
)

// Anchors are the fragments a Markdown file answers to on GitHub: its headings' slugs, a
// repeated one suffixed -1, -2, …, and the names of explicit <a name|id> anchors.
func Anchors(md []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(md) {
		for _, m := range explicitRE.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := Slug(m[2])
		if n := seen[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	}
	return anchors
}

// Slug is the anchor GitHub gives a heading: the text as rendered (link text kept, code
// marks and tags dropped), lower-cased, every character other than a letter, a digit, a
// space, a hyphen or an underscore removed, and each space made a hyphen.
func Slug(heading string) string {
	text := linkTextRE.ReplaceAllString(heading, "$1")
	text = tagRE.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
