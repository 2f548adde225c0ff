// Package chart draws the bench's figures as small, self-contained SVG images: step or line
// series over time and histograms. It writes the SVG itself (no chart library) so that the
// same input always gives the same bytes, and the images stay readable where GitHub shows
// them (800 px wide, white background, 12 px sans-serif text, ticks at 1/2/5 steps).
package chart

import (
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Geometry of every chart, in SVG user units (pixels at 100 %).
const (
	width        = 800
	height       = 320
	marginLeft   = 64
	marginRight  = 24 // without a right axis
	rightAxisGap = 64 // with one
	marginTop    = 64 // title and legend
	marginBottom = 48 // x ticks and label
	charWidth    = 6.6
)

// palette: the Okabe–Ito colours, distinguishable with the common colour-vision deficiencies.
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"}

// Point is one (x, y) sample.
type Point struct{ X, Y float64 }

// Series is one named curve.
type Series struct {
	Name   string
	Points []Point
	// Step draws the series as a step function: each value holds until the next point.
	Step bool
	// Right plots the series against the right axis (when its scale differs by orders of
	// magnitude from the left one's, e.g. nodes beside pods).
	Right bool
}

// Line is a chart of series over a common x axis.
type Line struct {
	Title, XLabel, YLabel string
	// RightLabel names the right axis, drawn when a series asks for it.
	RightLabel string
	Series     []Series
}

// Mark is a labelled vertical line (a percentile on a histogram).
type Mark struct {
	Label string
	X     float64
}

// Histogram is the distribution of Values in bins of a round width.
type Histogram struct {
	Title, XLabel, YLabel string
	// Name is the legend's label for the bars.
	Name   string
	Values []float64
	Marks  []Mark
}

// axis maps data values to pixels along one dimension.
type axis struct {
	lo, hi   float64 // data range
	from, to float64 // pixels
	step     float64 // tick spacing
	ticks    []float64
}

func (a axis) at(v float64) float64 {
	return a.from + (v-a.lo)/(a.hi-a.lo)*(a.to-a.from)
}

// niceStep is a 1, 2 or 5 × 10^k step that cuts span into about n parts.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	rough := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(rough)))
	switch norm := rough / mag; {
	case norm <= 1:
		return mag
	case norm <= 2:
		return 2 * mag
	case norm <= 5:
		return 5 * mag
	default:
		return 10 * mag
	}
}

// newAxis covers [lo, hi] with round ticks; the range is widened to the ticks around it.
// integer keeps the step ≥ 1 (counts).
func newAxis(lo, hi float64, n int, integer bool, from, to float64) axis {
	if hi <= lo {
		hi = lo + 1
	}
	step := niceStep(hi-lo, n)
	if integer && step < 1 {
		step = 1
	}
	a := axis{lo: math.Floor(lo/step+1e-9) * step, hi: math.Ceil(hi/step-1e-9) * step, from: from, to: to, step: step}
	if a.hi <= a.lo {
		a.hi = a.lo + step
	}
	for i := 0; ; i++ {
		v := a.lo + float64(i)*step
		if v > a.hi+step*1e-6 {
			break
		}
		a.ticks = append(a.ticks, v)
	}
	return a
}

// label formats a tick with as many decimals as its step needs.
func (a axis) label(v float64) string {
	dec := 0
	if a.step < 1 {
		dec = int(math.Ceil(-math.Log10(a.step) - 1e-9))
	}
	return num(v, dec)
}

// num formats v with dec decimals, never "-0".
func num(v float64, dec int) string {
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if strings.Trim(s, "-0.") == "" {
		s = strconv.FormatFloat(0, 'f', dec, 64)
	}
	return s
}

// px formats a pixel coordinate (0.1 px is finer than any screen).
func px(v float64) string { return num(v, 1) }

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// canvas accumulates one SVG document.
type canvas struct {
	b                    strings.Builder
	left, right, top, bo float64
}

func newCanvas(title string, rightAxis bool) *canvas {
	c := &canvas{left: marginLeft, right: width - marginRight, top: marginTop, bo: height - marginBottom}
	if rightAxis {
		c.right = width - rightAxisGap
	}
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&c.b, "<title>%s</title>\n", esc(title))
	// An opaque background: GitHub's dark theme would otherwise put black text on black.
	fmt.Fprintf(&c.b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&c.b, `<text x="%d" y="22" font-size="15" font-weight="bold" text-anchor="middle">%s</text>`+"\n", width/2, esc(title))
	return c
}

func (c *canvas) text(x, y float64, anchor, s string, extra string) {
	fmt.Fprintf(&c.b, `<text x="%s" y="%s" text-anchor="%s"%s>%s</text>`+"\n", px(x), px(y), anchor, extra, esc(s))
}

// xAxis draws the bottom axis, its grid and label.
func (c *canvas) xAxis(a axis, label string) {
	c.b.WriteString(`<g class="x-axis" stroke="#888888">` + "\n")
	fmt.Fprintf(&c.b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", px(c.left), px(c.bo), px(c.right), px(c.bo))
	for _, t := range a.ticks {
		x := a.at(t)
		fmt.Fprintf(&c.b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", px(x), px(c.bo), px(x), px(c.bo+5))
	}
	c.b.WriteString("</g>\n")
	for _, t := range a.ticks {
		c.text(a.at(t), c.bo+18, "middle", a.label(t), ` class="tick"`)
	}
	c.text((c.left+c.right)/2, height-8, "middle", label, "")
}

// yAxis draws a vertical axis on the left or the right, with horizontal grid lines from the
// left one.
func (c *canvas) yAxis(a axis, label string, right bool) {
	x, dir, anchor := c.left, -1.0, "end"
	if right {
		x, dir, anchor = c.right, 1.0, "start"
	}
	c.b.WriteString(`<g class="y-axis" stroke="#888888">` + "\n")
	fmt.Fprintf(&c.b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", px(x), px(c.top), px(x), px(c.bo))
	for _, t := range a.ticks {
		y := a.at(t)
		fmt.Fprintf(&c.b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", px(x), px(y), px(x+dir*5), px(y))
		if !right && t != a.lo {
			fmt.Fprintf(&c.b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e4e4e4"/>`+"\n", px(c.left+1), px(y), px(c.right), px(y))
		}
	}
	c.b.WriteString("</g>\n")
	for _, t := range a.ticks {
		c.text(x+dir*8, a.at(t)+4, anchor, a.label(t), ` class="tick"`)
	}
	// The label reads bottom to top beside the left axis, top to bottom beside the right.
	cy := (c.top + c.bo) / 2
	if right {
		c.text(width-14, cy, "middle", label, fmt.Sprintf(` transform="rotate(90 %s %s)"`, px(width-14), px(cy)))
	} else {
		c.text(16, cy, "middle", label, fmt.Sprintf(` transform="rotate(-90 16 %s)"`, px(cy)))
	}
}

// legend lays the entries out in a row under the title; swatch draws each entry's key at
// (x, y), the row's middle.
func (c *canvas) legend(names []string, swatch func(i int, x, y float64)) {
	c.b.WriteString(`<g class="legend">` + "\n")
	x, y := c.left, 44.0
	for i, n := range names {
		swatch(i, x, y)
		c.text(x+24, y+4, "start", n, "")
		x += 24 + float64(len([]rune(n)))*charWidth + 20
	}
	c.b.WriteString("</g>\n")
}

func (c *canvas) noData() {
	c.text((c.left+c.right)/2, (c.top+c.bo)/2, "middle", "no data", ` fill="#888888" class="no-data"`)
}

func (c *canvas) String() string {
	c.b.WriteString("</svg>\n")
	return c.b.String()
}

func color(i int) string { return palette[i%len(palette)] }

// SVG renders the line chart.
func (l Line) SVG() string {
	rightAxis := false
	var xs []float64
	maxY, maxR := 0.0, 0.0
	// An axis whose values are all whole (pods, nodes) gets whole ticks.
	intY, intR := true, true
	for _, s := range l.Series {
		rightAxis = rightAxis || s.Right
		for _, p := range s.Points {
			xs = append(xs, p.X)
			whole := p.Y == math.Trunc(p.Y)
			if s.Right {
				maxR, intR = math.Max(maxR, p.Y), intR && whole
			} else {
				maxY, intY = math.Max(maxY, p.Y), intY && whole
			}
		}
	}
	c := newCanvas(l.Title, rightAxis)
	loX, hiX := 0.0, 1.0
	if len(xs) > 0 {
		loX, hiX = math.Min(0, slices.Min(xs)), slices.Max(xs)
	}
	ax := newAxis(loX, hiX, 8, false, c.left, c.right)
	ay := newAxis(0, maxY, 5, intY, c.bo, c.top)
	c.yAxis(ay, l.YLabel, false)
	var ar axis
	if rightAxis {
		ar = newAxis(0, maxR, 5, intR, c.bo, c.top)
		c.yAxis(ar, l.RightLabel, true)
	}
	c.xAxis(ax, l.XLabel)
	if len(xs) == 0 {
		c.noData()
	}
	names := make([]string, len(l.Series))
	for i, s := range l.Series {
		names[i] = s.Name
		if s.Right && l.RightLabel != "" {
			names[i] += " (right axis)"
		}
		ya := ay
		if s.Right {
			ya = ar
		}
		c.series(i, s, ax, ya)
	}
	c.legend(names, func(i int, x, y float64) {
		dash := ""
		if l.Series[i].Right {
			dash = ` stroke-dasharray="6 3"`
		}
		fmt.Fprintf(&c.b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2.5"%s/>`+"\n", px(x), px(y), px(x+18), px(y), color(i), dash)
	})
	return c.String()
}

// series draws one curve; a lone point also gets a dot, since a path of one point is invisible.
func (c *canvas) series(i int, s Series, ax, ay axis) {
	dash := ""
	if s.Right {
		dash = ` stroke-dasharray="6 3"`
	}
	fmt.Fprintf(&c.b, `<g class="series" data-name="%s" data-points="%d">`+"\n", esc(s.Name), len(s.Points))
	if len(s.Points) > 0 {
		var d strings.Builder
		for j, p := range s.Points {
			x, y := px(ax.at(p.X)), px(ay.at(p.Y))
			switch {
			case j == 0:
				fmt.Fprintf(&d, "M%s %s", x, y)
			case s.Step:
				fmt.Fprintf(&d, "H%sV%s", x, y)
			default:
				fmt.Fprintf(&d, "L%s %s", x, y)
			}
		}
		fmt.Fprintf(&c.b, `<path d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s/>`+"\n", d.String(), color(i), dash)
	}
	if len(s.Points) == 1 {
		p := s.Points[0]
		fmt.Fprintf(&c.b, `<circle cx="%s" cy="%s" r="3.5" fill="%s"/>`+"\n", px(ax.at(p.X)), px(ay.at(p.Y)), color(i))
	}
	c.b.WriteString("</g>\n")
}

// SVG renders the histogram: about 40 bins of a round width from 0 (or the least value, if
// negative) to the greatest, one bar per non-empty bin (its count in a tooltip), the marks
// as dashed vertical lines.
func (h Histogram) SVG() string {
	c := newCanvas(h.Title, false)
	lo, hi := 0.0, 1.0
	if len(h.Values) > 0 {
		lo, hi = slices.Min(h.Values), slices.Max(h.Values)
	}
	for _, m := range h.Marks {
		lo, hi = math.Min(lo, m.X), math.Max(hi, m.X)
	}
	// From 0: a latency's distance from zero is part of the picture, and one value (or all
	// equal) then still gets bins of a sensible width.
	lo = math.Min(lo, 0)
	span := hi - lo
	if span <= 0 {
		span = 1
	}
	bin := niceStep(span, 40)
	start := math.Floor(lo/bin+1e-9) * bin
	n := int(math.Floor((hi-start)/bin+1e-9)) + 1
	counts := make([]int, n)
	for _, v := range h.Values {
		counts[min(n-1, max(0, int(math.Floor((v-start)/bin+1e-9))))]++
	}
	maxCount := 0
	for _, k := range counts {
		maxCount = max(maxCount, k)
	}
	ax := newAxis(start, start+float64(n)*bin, 8, false, c.left, c.right)
	ay := newAxis(0, float64(maxCount), 5, true, c.bo, c.top)
	c.yAxis(ay, h.YLabel, false)
	c.xAxis(ax, h.XLabel)
	if len(h.Values) == 0 {
		c.noData()
	}
	dec := 0
	if bin < 1 {
		dec = int(math.Ceil(-math.Log10(bin) - 1e-9))
	}
	fmt.Fprintf(&c.b, `<g class="bars" data-name="%s" data-values="%d" fill="%s">`+"\n", esc(h.Name), len(h.Values), color(0))
	for i, k := range counts {
		if k == 0 {
			continue
		}
		a, b := start+float64(i)*bin, start+float64(i+1)*bin
		x0, x1, y := ax.at(a), ax.at(b), ay.at(float64(k))
		fmt.Fprintf(&c.b, `<rect class="bar" data-count="%d" x="%s" y="%s" width="%s" height="%s"><title>%s–%s: %d</title></rect>`+"\n",
			k, px(x0+0.5), px(y), px(math.Max(x1-x0-1, 0.5)), px(c.bo-y), num(a, dec), num(b, dec), k)
	}
	c.b.WriteString("</g>\n")
	for i, m := range h.Marks {
		x := ax.at(m.X)
		fmt.Fprintf(&c.b, `<line class="mark" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333" stroke-dasharray="4 3"/>`+"\n", px(x), px(c.top), px(x), px(c.bo))
		// Alternate the labels' heights so that close marks (p50 beside p95) do not overlap.
		lx, anchor := x+4, "start"
		if lx+float64(len([]rune(m.Label)))*charWidth > c.right {
			lx, anchor = x-4, "end" // near the right edge: the label goes left of its line
		}
		// A white halo keeps the label readable over the bars.
		c.text(lx, c.top+12+float64(i%2)*14, anchor, m.Label, ` fill="#222222" stroke="#ffffff" stroke-width="3" paint-order="stroke"`)
	}
	c.legend([]string{h.Name}, func(_ int, x, y float64) {
		fmt.Fprintf(&c.b, `<rect x="%s" y="%s" width="18" height="10" fill="%s"/>`+"\n", px(x), px(y-5), color(0))
	})
	return c.String()
}
