package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRepositoryLinks is make verify's check, run by make test too: every relative link of the
// project's documents resolves.
func TestRepositoryLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Documents(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"README.md", "CHANGELOG.md", "docs/install.md", "docs/reference/settings.md", "examples/README.md"} {
		if !slices.Contains(docs, want) {
			t.Errorf("the documents checked leave out %s", want)
		}
	}
	problems, err := Check(root, docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// GitHub's anchors, as its renderer writes them for these headings.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Install": "install",
		"Dev loop: build and apply from the checkout":         "dev-loop-build-and-apply-from-the-checkout",
		"Why is my pod Pending?":                              "why-is-my-pod-pending",
		"`make bundle`":                                       "make-bundle",
		"The controller restarts with `leader election lost`": "the-controller-restarts-with-leader-election-lost",
		"KarpenterCleverCloudQuotaRefusals":                   "karpenterclevercloudquotarefusals",
		"Image and release (v0.1.0)":                          "image-and-release-v010",
		"[Unreleased]":                                        "unreleased",
		"[v1.2.3] - 2026-01-02":                               "v123---2026-01-02",
		"Settings: `CLEVER_CLOUD_REGION`":                     "settings-clever_cloud_region",
		"A [link](https://example.com) in a heading":          "a-link-in-a-heading",
		"Prix et quotas — été":                                "prix-et-quotas--été",
		"**Bold** and *em*":                                   "bold-and-em",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestAnchors(t *testing.T) {
	md := "# Title\n\n## Usage\n\n```sh\n# not a heading\n```\n\n## Usage\n\n### Usage\n\n<a id=\"custom\"></a>\n"
	got := Anchors([]byte(md))
	for _, want := range []string{"title", "usage", "usage-1", "usage-2", "custom"} {
		if !got[want] {
			t.Errorf("anchor %q missing from %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block was taken for a heading")
	}
}

// TestCheckFindsBroken: on a small tree, each kind of broken link is reported at its line, and
// the links that resolve (and those the checker must leave alone) are not.
func TestCheckFindsBroken(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"README.md": strings.Join([]string{
			"# Project",                                                 // 1
			"[ok](docs/guide.md#step-2) [ok](docs/)",                    // 2
			"[missing file](docs/gone.md)",                              // 3
			"[missing anchor](docs/guide.md#step-3)",                    // 4
			"[self](#project) [self missing](#nothing)",                 // 5
			"`[in code](nowhere.md)` [web](https://example.com/x.md#y)", // 6
			"```",                          // 7
			"[in a block](nowhere.md)",     // 8
			"```",                          // 9
			"[code line](main.go#L3)",      // 10
			"[ref]: docs/guide.md#no-such", // 11
			"[up](../outside.md)",          // 12
			`<a href="docs/gone.md">x</a>`, // 13
			"[dir anchor](docs/#step-2)",   // 14
		}, "\n"),
		"docs/guide.md": "# Guide\n\n## Step 2\n\n[back](../README.md#project)\n",
		"main.go":       "package main\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	problems, err := Check(root, []string{"README.md", "docs/guide.md"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.File+":"+p.Target)
		if p.Why == "" {
			t.Errorf("%v gives no reason", p)
		}
	}
	want := []string{
		"README.md:docs/gone.md",
		"README.md:docs/guide.md#step-3",
		"README.md:#nothing",
		"README.md:docs/guide.md#no-such",
		"README.md:../outside.md",
		"README.md:docs/gone.md",
		"README.md:docs/#step-2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("reported\n  %q\nwant\n  %q", got, want)
	}
	if len(problems) > 0 && problems[0].Line != 3 {
		t.Errorf("the first problem is at line %d, want 3", problems[0].Line)
	}
}
