package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/bench/chart"
)

// ChartsDir is where the report's charts go, beside REPORT.md (which links them relatively).
const ChartsDir = "charts"

// chartFile is one chart of one scenario run.
type chartFile struct {
	// Name is the file's name in ChartsDir: <scenario>-<profile>-<chart>.svg.
	Name, Alt string
	render    func() string
}

// slug keeps [a-z0-9-] of s, anything else becomes '-'.
func slug(s string) string {
	return strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, s), "-")
}

func points(ps []Point) []chart.Point {
	out := make([]chart.Point, len(ps))
	for i, p := range ps {
		out[i] = chart.Point{X: p[0], Y: p[1]}
	}
	return out
}

// charts are the run's charts that have something to show: pods pending and running with
// Karpenter's nodes over time, the fleet's cost over time beside its lower bound, and the
// distribution of pending → Running.
func (s *Result) charts() []chartFile {
	se := s.Series
	if se == nil {
		return nil
	}
	run := slug(s.Name)
	if s.Profile != "" {
		run += "-" + slug(s.Profile)
	}
	head := s.Name
	if s.Profile != "" {
		head += " (" + s.Profile + ")"
	}
	const xLabel = "seconds since the window opened"
	var out []chartFile
	if len(se.PodsPending) > 0 || len(se.Nodes) > 0 {
		out = append(out, chartFile{Name: run + "-pods-nodes.svg", Alt: head + ": pods pending and running, Karpenter's nodes over time", render: func() string {
			return chart.Line{
				Title: head + ": pods and nodes over time", XLabel: xLabel, YLabel: "pods", RightLabel: "nodes",
				Series: []chart.Series{
					{Name: "pods pending", Step: true, Points: points(se.PodsPending)},
					{Name: "pods Running", Step: true, Points: points(se.PodsRunning)},
					{Name: "Karpenter's nodes", Step: true, Right: true, Points: points(se.Nodes)},
				},
			}.SVG()
		}})
	}
	if len(se.FleetHourly) > 0 {
		out = append(out, chartFile{Name: run + "-cost.svg", Alt: head + ": fleet cost over time", render: func() string {
			series := []chart.Series{{Name: "fleet (decided NodeGroups)", Step: true, Points: points(se.FleetHourly)}}
			if s.Cost != nil && s.Cost.Bound.CostHourly > 0 {
				b := s.Cost.Bound.CostHourly
				series = append(series, chart.Series{Name: "lower bound for the Running pods at the end", Points: []chart.Point{{X: 0, Y: b}, {X: se.EndSeconds, Y: b}}})
			}
			return chart.Line{Title: head + ": fleet cost over time", XLabel: xLabel, YLabel: "EUR per hour", Series: series}.SVG()
		}})
	}
	if v := se.PendingToRunningSeconds; len(v) > 0 {
		out = append(out, chartFile{Name: run + "-latency.svg", Alt: head + ": distribution of pod pending → Running", render: func() string {
			st := s.PendingToRunning
			return chart.Histogram{
				Title: head + ": pod pending → Running", XLabel: "seconds from the pod's creation to Running and Ready", YLabel: "pods",
				Name:   fmt.Sprintf("pods of the window (%d)", len(v)),
				Values: v,
				Marks:  []chart.Mark{{Label: fmt.Sprintf("p50 %.2f s", st.P50), X: st.P50}, {Label: fmt.Sprintf("p95 %.2f s", st.P95), X: st.P95}},
			}.SVG()
		}})
	}
	return out
}

// writeCharts writes every run's charts into dir/ChartsDir and removes the SVGs of an
// earlier report that this one does not have, so that the folder matches REPORT.md.
func (r *Report) writeCharts(dir string) error {
	cd := filepath.Join(dir, ChartsDir)
	want := map[string]bool{}
	for _, s := range r.Results {
		for _, c := range s.charts() {
			if len(want) == 0 {
				if err := os.MkdirAll(cd, 0o755); err != nil {
					return fmt.Errorf("creating the charts folder: %w", err)
				}
			}
			want[c.Name] = true
			if err := os.WriteFile(filepath.Join(cd, c.Name), []byte(c.render()), 0o644); err != nil {
				return fmt.Errorf("writing chart %s: %w", c.Name, err)
			}
		}
	}
	old, err := filepath.Glob(filepath.Join(cd, "*.svg"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if !want[filepath.Base(f)] {
			if err := os.Remove(f); err != nil {
				return fmt.Errorf("removing a stale chart: %w", err)
			}
		}
	}
	return nil
}

// chartLinks embeds the run's charts in the report, linked relative to REPORT.md.
func (s *Result) chartLinks(b *strings.Builder) {
	cs := s.charts()
	for _, c := range cs {
		fmt.Fprintf(b, "![%s](%s/%s)\n", c.Alt, ChartsDir, c.Name)
	}
	if len(cs) > 0 {
		b.WriteString("\n")
	}
}
