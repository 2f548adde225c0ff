package conformance

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestConformanceSubset is the part of Karpenter core's suites that `make test` runs: one or
// two specs per area (provisioning, NodeClaim lifecycle, validation, drift, termination,
// consolidation), chosen among those that finish in seconds on the fast
// profile. Every one must pass; `make conformance` runs the rest.
func TestConformanceSubset(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance subset: skipped with -short")
	}
	logf.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	dir := t.TempDir()
	suites := subsetSuites()
	rep, err := Run(ctx, Config{Suites: suites, Focus: SubsetFocus(), WorkDir: dir, Timeout: 20 * time.Minute, Logf: t.Logf})
	if rep != nil && len(rep.Suites) > 0 {
		// Kept beside the test's output for a failed run; the work folder goes with t.TempDir.
		if werr := rep.Write(filepath.Join(os.TempDir(), "karpenter-conformance-subset"), "subset"); werr != nil {
			t.Log(werr)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]Spec{}
	for _, s := range rep.Suites {
		for _, sp := range s.Specs {
			if sp.State == "skipped" {
				// Outside the focus, or on the skip list: a subset spec there fails below.
				continue
			}
			ran[s.Name+": "+sp.Text] = sp
		}
	}
	for _, want := range Subset {
		sp, ok := ran[want.Suite+": "+want.Text]
		switch {
		case !ok:
			t.Errorf("%s: %q did not run (renamed in core?)", want.Suite, want.Text)
		case sp.State != "passed":
			t.Errorf("%s: %q %s in %.1fs: %s%s", want.Suite, want.Text, sp.State, sp.Seconds, sp.Failure, sp.Reason)
		default:
			t.Logf("%s: %q passed in %.1fs", want.Suite, want.Text, sp.Seconds)
		}
	}
	if len(ran) != len(Subset) {
		t.Errorf("%d specs ran, want the %d of the subset", len(ran), len(Subset))
	}
	if t.Failed() {
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			lines := strings.Split(string(b), "\n")
			if len(lines) > 80 {
				lines = lines[len(lines)-80:]
			}
			t.Logf("tail of %s:\n%s", filepath.Base(l), strings.Join(lines, "\n"))
		}
	}
}

func TestSkipsMatchTheirOwnSpecs(t *testing.T) {
	for _, s := range Skips {
		if _, err := regexp.Compile(s.Pattern); err != nil {
			t.Errorf("skip %q: %v", s.Pattern, err)
		}
		if s.Reason == "" || s.Category == "" {
			t.Errorf("skip %q has no reason or category", s.Pattern)
		}
	}
	desc := map[string]string{"regression": "Regression", "disruption": "Disruption"}
	cases := []struct {
		suite, text string
		full        bool
		want        Category
	}{
		{"disruption", "Reboot should reboot a node in place when repair matches a reboot policy", false, Platform},
		{"disruption", "TerminateFirst terminates first when drifting an at-limit static NodePool", true, InCluster},
		{"regression", "DefaultTopologySpreadConstraints should pack pods the cluster's defaults don't apply to", false, Platform},
		{"regression", "NodeClaim StandaloneNodeClaim should delete a NodeClaim after the registration timeout when the node doesn't register", false, LongTimer},
		{"regression", "NodeClaim StandaloneNodeClaim should delete a NodeClaim after the registration timeout when the node doesn't register", true, ""},
		{"disruption", "Repair repairs an isolated unhealthy node", false, LongTimer},
		{"disruption", "Repair does not repair a node carrying the do-not-repair annotation", false, LongTimer},
		{"disruption", "Repair repairs an isolated unhealthy node", true, ""},
		{"disruption", "Repair Kubelet conditions Conditions Node Ready False", false, ""},
		{"disruption", "Termination should terminate the node and the instance on deletion", false, ""},
	}
	for _, c := range cases {
		skips := activeSkips(c.suite, c.full)
		full := desc[c.suite] + " " + c.text
		s, ok := skipFor(skips, full)
		if got := Category(""); ok {
			got = s.Category
			if got != c.want {
				t.Errorf("%s (full=%v): skipped as %q, want %q", c.text, c.full, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%s (full=%v): not skipped, want %q", c.text, c.full, c.want)
		}
		// ginkgo matches the joined regexp the same way.
		if re := skipRegexp(skips); re != "" && regexp.MustCompile(re).MatchString(full) != ok {
			t.Errorf("%s: --ginkgo.skip and the report disagree", c.text)
		}
	}
}

func TestReadSuite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	report := `[{"SuiteDescription":"Disruption","SuiteSucceeded":false,"RunTime":3000000000,"SpecReports":[
	 {"LeafNodeType":"BeforeSuite","State":"passed"},
	 {"ContainerHierarchyTexts":["Repair"],"LeafNodeText":"repairs an isolated unhealthy node","LeafNodeType":"It","State":"passed","RunTime":12340000000},
	 {"ContainerHierarchyTexts":["Reboot"],"LeafNodeText":"should reboot a node in place when repair matches a reboot policy","LeafNodeType":"It","State":"skipped"},
	 {"ContainerHierarchyTexts":["Repair","Kubelet conditions"],"LeafNodeText":"x","LeafNodeType":"It","State":"skipped","Failure":{"Message":"injecting kubelet Ready conditions requires the KWOK provider"}},
	 {"ContainerHierarchyTexts":["Termination"],"LeafNodeText":"y","LeafNodeType":"It","State":"failed","Failure":{"Message":"Timed out after 900s","Location":{"FileName":"/m/termination_test.go","LineNumber":42}}}
	]}]`
	if err := os.WriteFile(path, []byte(report), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := readSuite("disruption", path, activeSkips("disruption", false))
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Count(); c != (Counts{Passed: 1, Failed: 1, Skipped: 2}) {
		t.Errorf("counts %+v", c)
	}
	if got := res.Specs[0].Seconds; got != 12.3 {
		t.Errorf("wall time %v, want 12.3", got)
	}
	if res.Specs[1].Category != Platform || res.Specs[2].Category != SelfSkip {
		t.Errorf("skip reasons: %+v / %+v", res.Specs[1], res.Specs[2])
	}
	if !strings.Contains(res.Specs[3].Failure, "termination_test.go:42") {
		t.Errorf("failure %q", res.Specs[3].Failure)
	}
	rep := &Report{Mode: "test", Suites: []SuiteResult{res}}
	md := rep.Markdown()
	for _, want := range []string{"**1 passed, 1 failed, 2 skipped**", "| Repair repairs an isolated unhealthy node | passed | 12.3 |", "NodeRebootNotImplemented"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
