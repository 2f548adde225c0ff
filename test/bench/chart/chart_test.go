package chart

import (
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
)

// node is a decoded XML element, enough to query the SVG.
type node struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Children []node     `xml:",any"`
	Text     string     `xml:",chardata"`
}

func (n node) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// find returns every element below n (n included) for which ok holds, in document order.
func (n node) find(ok func(node) bool) []node {
	var out []node
	if ok(n) {
		out = append(out, n)
	}
	for _, c := range n.Children {
		out = append(out, c.find(ok)...)
	}
	return out
}

func byClass(class string) func(node) bool {
	return func(n node) bool { return n.attr("class") == class }
}

func byName(local string) func(node) bool {
	return func(n node) bool { return n.XMLName.Local == local }
}

// parse checks that svg is one well-formed XML document with an <svg> root, and decodes it.
func parse(t *testing.T, svg string) node {
	t.Helper()
	// Well-formedness: the strict tokenizer reads to the end without error, one root.
	d := xml.NewDecoder(strings.NewReader(svg))
	depth, roots := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		switch tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
			}
			depth++
		case xml.EndElement:
			depth--
		}
	}
	if roots != 1 || depth != 0 {
		t.Fatalf("%d root elements, depth %d at the end", roots, depth)
	}
	var root node
	if err := xml.Unmarshal([]byte(svg), &root); err != nil {
		t.Fatal(err)
	}
	if root.XMLName.Local != "svg" || root.XMLName.Space != "http://www.w3.org/2000/svg" {
		t.Fatalf("root %v, want svg in the SVG namespace", root.XMLName)
	}
	return root
}

func texts(n node) []string {
	var out []string
	for _, t := range n.find(byName("text")) {
		out = append(out, t.Text)
	}
	return out
}

func contains(xs []string, want string) bool {
	for _, x := range xs {
		if x == want {
			return true
		}
	}
	return false
}

func TestLineSeriesAndAxes(t *testing.T) {
	l := Line{
		Title: "pods & nodes <over time>", XLabel: "seconds", YLabel: "pods", RightLabel: "nodes",
		Series: []Series{
			{Name: "pending", Step: true, Points: []Point{{0, 0}, {1, 10}, {4, 3}, {9, 0}, {12, 0}}},
			{Name: "nodes", Step: true, Right: true, Points: []Point{{0, 0}, {5, 2}, {12, 2}}},
			{Name: "trend", Points: []Point{{0, 1}, {12, 2}}},
		},
	}
	root := parse(t, l.SVG())
	series := root.find(byClass("series"))
	if len(series) != 3 {
		t.Fatalf("%d series groups, want 3", len(series))
	}
	for i, want := range []struct {
		name   string
		points int
		cmds   string // path commands after the M
	}{{"pending", 5, "HVHVHVHV"}, {"nodes", 3, "HVHV"}, {"trend", 2, "L"}} {
		g := series[i]
		if g.attr("data-name") != want.name || g.attr("data-points") != strconv.Itoa(want.points) {
			t.Errorf("series %d: name %q points %q, want %q %d", i, g.attr("data-name"), g.attr("data-points"), want.name, want.points)
		}
		paths := g.find(byName("path"))
		if len(paths) != 1 {
			t.Fatalf("series %s: %d paths", want.name, len(paths))
		}
		var cmds strings.Builder
		for _, r := range paths[0].attr("d") {
			if strings.ContainsRune("MHVL", r) {
				cmds.WriteRune(r)
			}
		}
		if cmds.String() != "M"+want.cmds {
			t.Errorf("series %s: path commands %q, want %q", want.name, cmds.String(), "M"+want.cmds)
		}
	}
	ts := texts(root)
	for _, want := range []string{"pods & nodes <over time>", "seconds", "pods", "nodes", "pending", "nodes (right axis)", "trend", "0", "10", "12"} {
		if !contains(ts, want) {
			t.Errorf("no text %q in %q", want, ts)
		}
	}
	// The right axis counts nodes 0..2 in whole steps.
	ticks := root.find(byClass("tick"))
	if len(ticks) == 0 {
		t.Fatal("no tick labels")
	}
	for _, tk := range ticks {
		if strings.Contains(tk.Text, ".") {
			t.Errorf("tick %q on an axis of whole counts and whole seconds", tk.Text)
		}
	}
}

// The pending series' peak (10 at x=1) is drawn at the top of the left axis's range, and
// its first point at the plot's left edge.
func TestLineScales(t *testing.T) {
	l := Line{Series: []Series{{Name: "p", Points: []Point{{0, 0}, {10, 10}}}}}
	root := parse(t, l.SVG())
	d := root.find(byName("path"))[0].attr("d")
	var x0, y0, x1, y1 float64
	if _, err := fmtSscanf(d, &x0, &y0, &x1, &y1); err != nil {
		t.Fatalf("path %q: %v", d, err)
	}
	if x0 != marginLeft || y0 != height-marginBottom || x1 != width-marginRight || y1 != marginTop {
		t.Errorf("path %q: want (%d,%d) to (%d,%d)", d, marginLeft, height-marginBottom, width-marginRight, marginTop)
	}
}

func fmtSscanf(d string, xs ...*float64) (int, error) {
	f := strings.FieldsFunc(d, func(r rune) bool { return r == ' ' || r == 'M' || r == 'L' })
	for i, p := range xs {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return i, err
		}
		*p = v
	}
	return len(xs), nil
}

func TestLineEmptyAndSinglePoint(t *testing.T) {
	for name, l := range map[string]Line{
		"no series":    {Title: "empty"},
		"empty series": {Title: "empty", Series: []Series{{Name: "a"}, {Name: "b", Right: true}}},
	} {
		t.Run(name, func(t *testing.T) {
			root := parse(t, l.SVG())
			if len(root.find(byClass("no-data"))) != 1 {
				t.Error("no \"no data\" notice")
			}
			if len(root.find(byName("path"))) != 0 {
				t.Error("a path for no points")
			}
		})
	}
	t.Run("single point", func(t *testing.T) {
		root := parse(t, Line{Series: []Series{{Name: "one", Step: true, Points: []Point{{3, 7}}}}}.SVG())
		if n := len(root.find(byName("circle"))); n != 1 {
			t.Errorf("%d dots, want 1 for the lone point", n)
		}
		if len(root.find(byClass("no-data"))) != 0 {
			t.Error("\"no data\" with a point")
		}
	})
}

func TestHistogram(t *testing.T) {
	h := Histogram{
		Title: "latency", XLabel: "seconds", YLabel: "pods", Name: "pending → Running",
		Values: []float64{1.0, 1.1, 1.2, 2.5, 2.5, 2.6, 4.9},
		Marks:  []Mark{{"p50 2.5 s", 2.5}, {"p95 4.9 s", 4.9}},
	}
	root := parse(t, h.SVG())
	total := 0
	for _, b := range root.find(byClass("bar")) {
		k, err := strconv.Atoi(b.attr("data-count"))
		if err != nil || k <= 0 {
			t.Errorf("bar count %q", b.attr("data-count"))
		}
		total += k
	}
	if total != len(h.Values) {
		t.Errorf("bars hold %d values, want %d", total, len(h.Values))
	}
	if n := len(root.find(byClass("mark"))); n != 2 {
		t.Errorf("%d marks, want 2", n)
	}
	ts := texts(root)
	for _, want := range []string{"latency", "p50 2.5 s", "p95 4.9 s", "pending → Running", "pods", "seconds"} {
		if !contains(ts, want) {
			t.Errorf("no text %q", want)
		}
	}
}

func TestHistogramEdges(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		root := parse(t, Histogram{Title: "none"}.SVG())
		if len(root.find(byClass("bar"))) != 0 || len(root.find(byClass("no-data"))) != 1 {
			t.Error("want no bar and a \"no data\" notice")
		}
	})
	for name, vs := range map[string][]float64{"one value": {3.2}, "all equal": {5, 5, 5}, "zero": {0}} {
		t.Run(name, func(t *testing.T) {
			root := parse(t, Histogram{Values: vs}.SVG())
			bars := root.find(byClass("bar"))
			if len(bars) != 1 || bars[0].attr("data-count") != strconv.Itoa(len(vs)) {
				t.Errorf("bars %v, want one of %d", bars, len(vs))
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	l := Line{Title: "t", Series: []Series{{Name: "a", Step: true, Points: []Point{{0, 1}, {2.345, 3}}}, {Name: "b", Right: true, Points: []Point{{1, 0.0333}}}}}
	h := Histogram{Title: "h", Values: []float64{0.3, 1.7, 0.9}}
	if l.SVG() != l.SVG() || h.SVG() != h.SVG() {
		t.Error("the same chart rendered twice differs")
	}
}

func TestNiceAxis(t *testing.T) {
	a := newAxis(0, 0.0944, 5, false, 0, 100)
	if a.step != 0.02 || a.hi != 0.1 || a.label(0.04) != "0.04" {
		t.Errorf("axis %+v, label %q", a, a.label(0.04))
	}
	a = newAxis(0, 3, 5, true, 0, 100)
	if a.step != 1 || len(a.ticks) != 4 {
		t.Errorf("count axis %+v", a)
	}
}
