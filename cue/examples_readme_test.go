package bundle_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestExamplesREADME: examples/README.md lists every example exactly once, links only files
// that exist, and names end-to-end tests that exist.
func TestExamplesREADME(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "examples", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "examples", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| \\[`([^`]+)`\\]\\(([^)]+)\\)").FindAllStringSubmatch(string(readme), -1) {
		if m[1] != m[2] {
			t.Errorf("row %s links to %s", m[1], m[2])
		}
		listed = append(listed, m[1])
	}
	for _, f := range files {
		name := filepath.Base(f)
		if n := slices.Index(listed, name); n < 0 {
			t.Errorf("examples/README.md does not list %s", name)
		} else if slices.Index(listed[n+1:], name) >= 0 {
			t.Errorf("examples/README.md lists %s twice", name)
		}
	}
	for _, name := range listed {
		if _, err := os.Stat(filepath.Join(root, "examples", name)); err != nil {
			t.Errorf("examples/README.md lists %s: %v", name, err)
		}
	}

	var e2e strings.Builder
	// Every end-to-end package: one per area under test/e2e.
	err = filepath.WalkDir(filepath.Join(root, "test", "e2e"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		e2e.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("`(Test[A-Za-z0-9_]+)`").FindAllStringSubmatch(string(readme), -1) {
		if !strings.Contains(e2e.String(), "func "+m[1]+"(") {
			t.Errorf("examples/README.md names %s, which no package under test/e2e defines", m[1])
		}
	}
}
