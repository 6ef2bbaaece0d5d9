package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	r := &Report{
		Machine:  Machine{OS: "linux", Arch: "amd64", CPUs: 2, Backend: "cpu", Date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		Model:    ModelInfo{Name: "tiny <&> model", Synthetic: true},
		Settings: Settings{DecodeTokens: 32, Repeats: 1, Chunk: 512, DecodeMethod: MethodImport, DecodeMethodIs: MethodDescription(MethodImport)},
	}
	for i, n := range []int{256, 512, 1024, 2048, 4096} {
		e := Entry{Length: n, Decode: &Decode{Context: n, Tokens: 32, Method: MethodImport, TokensPerSecond: 40 - float64(i)}}
		if n != 4096 { // the last length measured decode only
			e.Prefill = &Prefill{Tokens: n, TokensPerSecond: 2000 / float64(i+1)}
		}
		r.Results = append(r.Results, e)
	}
	return r
}

// svgElement is one element of a decoded SVG with its attributes and where
// it sits.
type svgElement struct {
	name    string
	attrs   map[string]string
	parents []string // ids of enclosing groups
}

func decodeSVG(t *testing.T, data []byte) []svgElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var out []svgElement
	var stack []string
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
				if el.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace %q", el.Name.Space)
				}
			}
			e := svgElement{name: el.Name.Local, attrs: map[string]string{}, parents: append([]string(nil), stack...)}
			for _, a := range el.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			out = append(out, e)
			stack = append(stack, e.attrs["id"])
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
	return out
}

// TestWriteSVG: the chart is well-formed SVG with a prefill and a decode
// series holding one point per measured length, titled axes, and the
// model's name escaped.
func TestWriteSVG(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	els := decodeSVG(t, b.Bytes())
	count := map[string]map[string]int{"prefill": {}, "decode": {}}
	for _, e := range els {
		for _, p := range e.parents {
			if c, ok := count[p]; ok {
				c[e.name]++
				if e.name == "polyline" {
					c["points"] = len(strings.Fields(e.attrs["points"]))
				}
			}
		}
	}
	if c := count["prefill"]; c["polyline"] != 1 || c["points"] != 4 || c["circle"] != 4 {
		t.Errorf("prefill series: %v, want one line of 4 points", c)
	}
	if c := count["decode"]; c["polyline"] != 1 || c["points"] != 5 || c["circle"] != 5 {
		t.Errorf("decode series: %v, want one line of 5 points", c)
	}
	s := b.String()
	for _, want := range []string{"tokens per second", "length N in tokens", "tiny &lt;&amp;&gt; model", ">4K<", ">256<"} {
		if !strings.Contains(s, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	// Rates from 40 to 2000 span more than 20x: the rate axis is logarithmic.
	if !strings.Contains(s, "tokens per second (log scale)") {
		t.Error("a 50x spread of rates is drawn on a linear axis")
	}
}

// TestWriteSVGPointsInside: every point lies inside the plot area, also
// with one length and a linear rate axis.
func TestWriteSVGPointsInside(t *testing.T) {
	r := sampleReport()
	r.Results = r.Results[2:3]
	var b bytes.Buffer
	if err := WriteSVG(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), ">tokens per second</text>") {
		t.Error("rates 38 and 667 are within 20x, want a linear axis")
	}
	for _, e := range decodeSVG(t, b.Bytes()) {
		if e.name != "circle" {
			continue
		}
		var x, y float64
		if _, err := fmt.Sscan(e.attrs["cx"], &x); err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscan(e.attrs["cy"], &y); err != nil {
			t.Fatal(err)
		}
		if x < padLeft || x > chartW-padRight || y < padTop || y > chartH-padBott {
			t.Errorf("point (%g, %g) outside the plot", x, y)
		}
	}
}

func TestWriteSVGEmpty(t *testing.T) {
	if err := WriteSVG(io.Discard, &Report{}); err == nil {
		t.Error("an empty report was charted")
	}
}
