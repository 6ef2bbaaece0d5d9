package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	chartW, chartH                     = 820, 500
	padLeft, padRight, padTop, padBott = 80, 110, 80, 56
)

// series is one line of the chart.
type series struct {
	id, label, colour string
	points            []point
}

type point struct {
	length int
	rate   float64
}

// WriteSVG draws tokens per second against length: a prefill and a decode
// line, length on a log2 axis, the rate on a linear axis from zero or, when
// the rates span more than a factor of 20, on a log10 axis.
func WriteSVG(w io.Writer, r *Report) error {
	prefill := series{id: "prefill", label: "prefill", colour: "#1f77b4"}
	decode := series{id: "decode", label: "decode", colour: "#d62728"}
	for _, e := range r.Results {
		if e.Prefill != nil && e.Prefill.TokensPerSecond > 0 {
			prefill.points = append(prefill.points, point{e.Length, e.Prefill.TokensPerSecond})
		}
		if e.Decode != nil && e.Decode.TokensPerSecond > 0 {
			decode.points = append(decode.points, point{e.Length, e.Decode.TokensPerSecond})
		}
	}
	all := append(append([]point(nil), prefill.points...), decode.points...)
	if len(all) == 0 {
		return fmt.Errorf("bench: nothing to chart: the report has no rates")
	}
	x, y := lengthAxis(all), rateAxis(all)

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	text(&b, chartW/2, 24, `text-anchor="middle" font-size="16" font-weight="bold"`, "Tokens per second against length: "+r.Model.Name)
	text(&b, chartW/2, 44, `text-anchor="middle" fill="#555"`, strings.TrimPrefix(Headline(r), "petal bench: "))
	text(&b, chartW/2, 62, `text-anchor="middle" fill="#555"`, chartNote(r))

	left, right, top, bottom := float64(padLeft), float64(chartW-padRight), float64(padTop), float64(chartH-padBott)
	px := func(n int) float64 { return left + x.frac(float64(n))*(right-left) }
	py := func(v float64) float64 { return bottom - y.frac(v)*(bottom-top) }

	b.WriteString(`<g id="grid" stroke="#ddd">` + "\n")
	for _, t := range x.ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", px(int(t)), top, px(int(t)), bottom)
	}
	for _, t := range y.ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", left, py(t), right, py(t))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#333"/>`+"\n", left, top, right-left, bottom-top)
	for _, t := range x.ticks {
		text(&b, px(int(t)), bottom+18, `text-anchor="middle"`, FormatLength(int(t)))
	}
	for _, t := range y.ticks {
		text(&b, left-8, py(t)+4, `text-anchor="end"`, formatRate(t))
	}
	text(&b, (left+right)/2, chartH-14, `text-anchor="middle"`, "length N in tokens (log scale)")
	yLabel := "tokens per second"
	if y.log {
		yLabel += " (log scale)"
	}
	fmt.Fprintf(&b, `<text x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">%s</text>`+"\n",
		(top+bottom)/2, (top+bottom)/2, escape(yLabel))

	for i, s := range []series{prefill, decode} {
		if len(s.points) == 0 {
			continue
		}
		fmt.Fprintf(&b, `<g id="%s" class="series" fill="%s" stroke="%s">`+"\n", s.id, s.colour, s.colour)
		var pts []string
		for _, p := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.length), py(p.rate)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke-width="2" points="%s"/>`+"\n", strings.Join(pts, " "))
		for _, p := range s.points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5"><title>%s at %s: %s tok/s</title></circle>`+"\n",
				px(p.length), py(p.rate), s.id, FormatLength(p.length), formatRate(p.rate))
		}
		ly := top + 12 + 22*float64(i)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke-width="2"/>`+"\n", right+12, ly, right+32, ly)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" stroke="none" fill="#000">%s</text>`+"\n", right+38, ly+4, escape(s.label))
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// chartNote says in a line what the two series measure.
func chartNote(r *Report) string {
	start := "a random imported state"
	if r.Settings.DecodeMethod == MethodPrefill {
		start = "a prefilled state"
	}
	return fmt.Sprintf("prefill: N fresh tokens; decode: %d steps after N tokens, from %s", r.Settings.DecodeTokens, start)
}

// axis maps values to [0, 1] of the plot, linearly or by logarithm.
type axis struct {
	lo, hi float64 // in the mapped space (log2, log10 or plain)
	log    bool
	base   float64
	ticks  []float64 // values, unmapped
}

func (a axis) frac(v float64) float64 {
	if a.log {
		v = math.Log(v) / math.Log(a.base)
	}
	return (v - a.lo) / (a.hi - a.lo)
}

// lengthAxis spans whole powers of two around the lengths, a tick at each.
func lengthAxis(ps []point) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range ps {
		l := math.Log2(float64(p.length))
		lo, hi = min(lo, math.Floor(l)), max(hi, math.Ceil(l))
	}
	if hi-lo < 1 {
		lo, hi = lo-1, hi+1
	}
	a := axis{lo: lo, hi: hi, log: true, base: 2}
	for e := lo; e <= hi; e++ {
		a.ticks = append(a.ticks, math.Exp2(e))
	}
	return a
}

// rateAxis starts at zero with round steps, unless the rates span more than
// a factor of 20, where it is logarithmic over whole decades.
func rateAxis(ps []point) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range ps {
		lo, hi = min(lo, p.rate), max(hi, p.rate)
	}
	if hi/lo > 20 {
		a := axis{lo: math.Floor(math.Log10(lo)), hi: math.Ceil(math.Log10(hi)), log: true, base: 10}
		for e := a.lo; e <= a.hi; e++ {
			d := math.Pow(10, e)
			a.ticks = append(a.ticks, d)
			if a.hi-a.lo <= 3 && e < a.hi {
				a.ticks = append(a.ticks, 2*d, 5*d)
			}
		}
		return a
	}
	step := niceStep(hi / 5)
	a := axis{lo: 0, hi: step * math.Ceil(hi*1.05/step)}
	for t := 0.0; t <= a.hi+step/2; t += step {
		a.ticks = append(a.ticks, t)
	}
	return a
}

// niceStep rounds up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func formatRate(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func text(b *bytes.Buffer, x, y float64, attrs, s string) {
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" %s>%s</text>`+"\n", x, y, attrs, escape(s))
}

func escape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
