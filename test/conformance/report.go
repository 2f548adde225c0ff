package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ginkgoReport is the part of ginkgo's --json-report (a list of suite reports) the report
// reads; ginkgo stays out of the repository's module, so its types are not imported.
type ginkgoReport struct {
	SuiteDescription string
	SuiteSucceeded   bool
	RunTime          time.Duration
	SpecReports      []struct {
		ContainerHierarchyTexts []string
		LeafNodeText            string
		LeafNodeType            string
		State                   string
		RunTime                 time.Duration
		Failure                 struct {
			Message  string
			Location struct {
				FileName   string
				LineNumber int
			}
		}
	}
	SpecialSuiteFailureReasons []string
}

// Spec is one spec's outcome.
type Spec struct {
	Suite string `json:"suite"`
	// Text is the containers' texts and the spec's own, as ginkgo prints them.
	Text  string `json:"text"`
	State string `json:"state"`
	// Seconds is the spec's wall time, setup and cleanup included.
	Seconds float64 `json:"seconds"`
	// Category and Reason say why a skipped spec did not run.
	Category Category `json:"category,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	// Failure is the first lines of a failed spec's message and where it failed.
	Failure string `json:"failure,omitempty"`
}

// SuiteResult is one suite's run.
type SuiteResult struct {
	Name      string   `json:"name"`
	Succeeded bool     `json:"succeeded"`
	Seconds   float64  `json:"seconds"`
	Problems  []string `json:"problems,omitempty"`
	Specs     []Spec   `json:"specs"`
}

// Counts sums outcomes.
type Counts struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// Count counts a suite's specs by outcome; anything but passed and skipped is a failure.
func (s SuiteResult) Count() Counts {
	var c Counts
	for _, sp := range s.Specs {
		switch sp.State {
		case "passed":
			c.Passed++
		case "skipped", "pending":
			c.Skipped++
		default:
			c.Failed++
		}
	}
	return c
}

// Report is a whole conformance run.
type Report struct {
	Mode       string        `json:"mode"`
	Karpenter  string        `json:"karpenter"`
	Commit     string        `json:"commit"`
	Started    time.Time     `json:"started"`
	Seconds    float64       `json:"seconds"`
	Focus      string        `json:"focus,omitempty"`
	Suites     []SuiteResult `json:"suites"`
	Simulator  string        `json:"simulator"`
	Controller string        `json:"controller"`
}

// Total counts every suite's specs.
func (r *Report) Total() Counts {
	var c Counts
	for _, s := range r.Suites {
		sc := s.Count()
		c.Passed += sc.Passed
		c.Failed += sc.Failed
		c.Skipped += sc.Skipped
	}
	return c
}

// readSuite turns a suite binary's JSON report into a SuiteResult, giving each skipped spec
// its reason: the skip list's entry, or the message the suite skipped itself with.
func readSuite(name, path string, skips []Skip) (SuiteResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return SuiteResult{}, fmt.Errorf("reading the %s suite's JSON report: %w", name, err)
	}
	var reports []ginkgoReport
	if err := json.Unmarshal(data, &reports); err != nil {
		return SuiteResult{}, fmt.Errorf("decoding the %s suite's JSON report %s: %w", name, path, err)
	}
	res := SuiteResult{Name: name, Succeeded: true}
	for _, r := range reports {
		res.Succeeded = res.Succeeded && r.SuiteSucceeded
		res.Seconds += r.RunTime.Seconds()
		res.Problems = append(res.Problems, r.SpecialSuiteFailureReasons...)
		for _, sr := range r.SpecReports {
			texts := append(append([]string{}, sr.ContainerHierarchyTexts...), sr.LeafNodeText)
			text := strings.Join(texts, " ")
			if sr.LeafNodeType != "It" {
				// A failed BeforeSuite/AfterSuite fails the run without failing a spec.
				if sr.State != "passed" && sr.State != "skipped" {
					res.Problems = append(res.Problems, fmt.Sprintf("%s %s: %s", sr.LeafNodeType, sr.State, firstLines(sr.Failure.Message, 3)))
				}
				continue
			}
			sp := Spec{Suite: name, Text: text, State: sr.State, Seconds: round(sr.RunTime.Seconds())}
			switch {
			case sr.State == "skipped":
				if s, ok := skipFor(skips, r.SuiteDescription+" "+text); ok {
					sp.Category, sp.Reason = s.Category, s.Reason
				} else if sr.Failure.Message != "" {
					sp.Category, sp.Reason = SelfSkip, firstLines(sr.Failure.Message, 2)
				} else {
					sp.Category, sp.Reason = "not selected", "outside the focus of this run"
				}
			case sr.State != "passed":
				sp.Failure = fmt.Sprintf("%s (%s:%d)", firstLines(sr.Failure.Message, 6),
					filepath.Base(sr.Failure.Location.FileName), sr.Failure.Location.LineNumber)
			}
			res.Specs = append(res.Specs, sp)
		}
	}
	return res, nil
}

// Write writes <base>.json and <base>.md into dir.
func (r *Report) Write(dir, base string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, base+".json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, base+".md"), []byte(r.Markdown()), 0o644)
}

// Markdown renders the report for docs/conformance/.
func (r *Report) Markdown() string {
	var b strings.Builder
	t := r.Total()
	fmt.Fprintf(&b, "# Karpenter core conformance (%s)\n\n", r.Mode)
	fmt.Fprintf(&b, "Karpenter core's own end-to-end suites (`sigs.k8s.io/karpenter` %s, `test/suites/*`, built from the module, unmodified) "+
		"against the provider on the simulated CKE. Generated by `make conformance` (`test/conformance`); do not edit.\n\n", r.Karpenter)
	fmt.Fprintf(&b, "- commit: `%s`, started %s, %s wall\n", r.Commit, r.Started.UTC().Format(time.RFC3339), time.Duration(r.Seconds*float64(time.Second)).Round(time.Second))
	fmt.Fprintf(&b, "- simulator: %s\n- controller: %s\n", r.Simulator, r.Controller)
	if r.Focus != "" {
		fmt.Fprintf(&b, "- focus: `%s`\n", r.Focus)
	}
	fmt.Fprintf(&b, "\n**%d passed, %d failed, %d skipped**\n\n", t.Passed, t.Failed, t.Skipped)
	b.WriteString("| suite | passed | failed | skipped | wall |\n|---|---|---|---|---|\n")
	for _, s := range r.Suites {
		c := s.Count()
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s |\n", s.Name, c.Passed, c.Failed, c.Skipped, time.Duration(s.Seconds*float64(time.Second)).Round(time.Second))
	}
	for _, s := range r.Suites {
		for _, p := range s.Problems {
			fmt.Fprintf(&b, "\n> %s: %s\n", s.Name, oneLine(p))
		}
	}
	for _, s := range r.Suites {
		fmt.Fprintf(&b, "\n## %s\n\n| spec | result | wall (s) | note |\n|---|---|---|---|\n", s.Name)
		specs := append([]Spec{}, s.Specs...)
		sort.SliceStable(specs, func(i, j int) bool { return specs[i].Text < specs[j].Text })
		for _, sp := range specs {
			fmt.Fprintf(&b, "| %s | %s | %.1f | %s |\n", cell(sp.Text), sp.State, sp.Seconds, cell(sp.Note()))
		}
	}
	return b.String()
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}

// Note is what a report says beside a spec: its failure, or why it was skipped.
func (sp Spec) Note() string {
	switch {
	case sp.Failure != "":
		return oneLine(sp.Failure)
	case sp.Reason != "":
		return fmt.Sprintf("*%s*: %s", sp.Category, oneLine(sp.Reason))
	}
	return ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }

func round(s float64) float64 { return float64(int64(s*10+0.5)) / 10 }
