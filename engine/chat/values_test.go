package chat

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"
	"github.com/tidwall/gjson"
)

func nestedList(depth int, leaf string) string {
	return strings.Repeat("[", depth) + leaf + strings.Repeat("]", depth)
}

// A value nested 100,000 deep took 30-60 s to convert (every level
// rescanned the levels below it): it is refused at once, naming the
// variable, and a value at the cap still renders.
func TestValueDepthCapped(t *testing.T) {
	tmpl, err := ParseTemplate("t", "{{ x|tojson }}")
	if err != nil {
		t.Fatal(err)
	}
	for _, deep := range []string{nestedList(100000, "1"), `{"a":` + nestedList(MaxValueDepth, "") + `}`} {
		start := time.Now()
		_, err := tmpl.Render([]byte(`{"messages":[],"x":` + deep + `}`))
		if d := time.Since(start); d > time.Second {
			t.Errorf("refusing took %v", d)
		}
		if err == nil || !strings.Contains(err.Error(), "nested more than 100 levels") || !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("deep value: %v", err)
		}
	}
	ok := nestedList(MaxValueDepth, "1")
	if got := mustRender(t, tmpl, `{"messages":[],"x":`+ok+`}`); got != ok {
		t.Errorf("at the cap: %.40s", got)
	}
	// tool-call arguments given as JSON text are converted too
	deepArgs := strconv.Quote(`{"a":` + nestedList(200, "1") + `}`)
	_, err = tmpl.Render([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":` + deepArgs + `}}]}]}`))
	if err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Errorf("deep arguments: %v", err)
	}
}

// The conversion is linear: a wide value of many shallow parts takes time
// in proportion to its size.
func TestValueConversionLinear(t *testing.T) {
	part := `{"k":[1,2.5,"s\u00e9",true,null,{"n":[[[` + nestedList(50, `"x"`) + `]]]}]}`
	small := "[" + strings.TrimSuffix(strings.Repeat(part+",", 200), ",") + "]"
	large := "[" + strings.TrimSuffix(strings.Repeat(part+",", 4000), ",") + "]"
	timeIt := func(s string) time.Duration {
		best := time.Duration(math.MaxInt64)
		for range 3 {
			start := time.Now()
			if _, err := valueFromJSON(s); err != nil {
				t.Fatal(err)
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	ts, tl := timeIt(small), timeIt(large)
	// 20 times the size: allow 60 times the time (noise), a quadratic one takes 400
	if tl > 60*ts+20*time.Millisecond {
		t.Errorf("20x the input took %v against %v", tl, ts)
	}
}

// referenceValue is the conversion as gjson walks it (quadratic in depth,
// fine for small inputs): the conversion must agree with it exactly.
func referenceValue(r gjson.Result) jinja.Value {
	switch r.Type {
	case gjson.Null:
		return jinja.None()
	case gjson.False:
		return jinja.NewBool(false)
	case gjson.True:
		return jinja.NewBool(true)
	case gjson.Number:
		if !strings.ContainsAny(r.Raw, ".eE") {
			if n, err := strconv.ParseInt(r.Raw, 10, 64); err == nil {
				return jinja.NewInt(n)
			}
		}
		return jinja.NewFloat(r.Float())
	case gjson.String:
		return jinja.NewString(r.Str)
	}
	if r.IsArray() {
		items := []jinja.Value{}
		r.ForEach(func(_, item gjson.Result) bool {
			items = append(items, referenceValue(item))
			return true
		})
		return jinja.NewList(items)
	}
	d := jinja.NewDict()
	r.ForEach(func(k, item gjson.Result) bool {
		d.AsDict().Set(k.Str, referenceValue(item))
		return true
	})
	return d
}

// sameValue compares kinds, scalars bit for bit, list items and dict keys
// in order.
func sameValue(a, b jinja.Value) error {
	switch {
	case a.IsNone() && b.IsNone():
		return nil
	case a.IsBool() && b.IsBool() && a.AsBool() == b.AsBool():
		return nil
	case a.IsInt() && b.IsInt() && a.AsInt() == b.AsInt():
		return nil
	case a.IsFloat() && b.IsFloat() && math.Float64bits(a.AsFloat()) == math.Float64bits(b.AsFloat()):
		return nil
	case a.IsString() && b.IsString() && a.AsString() == b.AsString():
		return nil
	case a.IsList() && b.IsList():
		x, y := a.AsList().Items, b.AsList().Items
		if len(x) != len(y) {
			return fmt.Errorf("list of %d against %d", len(x), len(y))
		}
		for i := range x {
			if err := sameValue(x[i], y[i]); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return nil
	case a.IsDict() && b.IsDict():
		x, y := a.AsDict(), b.AsDict()
		if strings.Join(x.Keys, "\x00") != strings.Join(y.Keys, "\x00") {
			return fmt.Errorf("keys %q against %q", x.Keys, y.Keys)
		}
		for _, k := range x.Keys {
			if err := sameValue(x.Data[k], y.Data[k]); err != nil {
				return fmt.Errorf(".%s: %w", k, err)
			}
		}
		return nil
	}
	return fmt.Errorf("%s against %s", a.String(), b.String())
}

func depthOf(r gjson.Result) int {
	if !r.IsArray() && !r.IsObject() {
		return 0
	}
	deepest := 0
	r.ForEach(func(_, v gjson.Result) bool {
		deepest = max(deepest, depthOf(v))
		return true
	})
	return deepest + 1
}

// FuzzValueFromJSON: on any JSON text the conversion agrees with the
// reference walk (or refuses a value nested deeper than the cap); on any
// other text it fails or agrees, never panics.
func FuzzValueFromJSON(f *testing.F) {
	for _, seed := range []string{
		`null`, `true`, `false`, `0`, `-0`, `3`, `3.0`, `1e3`, `-1.5E-7`, `123456789012345678901234567890`, `1e999`,
		`""`, `"a\"b\\c\/\u00e9\ud83d\ude00\ud800"`, `"\n\t"`, "\"\xff\"",
		`[]`, `{}`, `[1,[2,[3]]]`, `{"b":1,"a":2,"b":3}`, `{"":{"":[]}}`, ` { "a" : [ 1 , 2 ] } `,
		`{"type":"object","properties":{"x":{"type":"array","items":{"type":"integer"}}},"required":["x"]}`,
		nestedList(MaxValueDepth, "1"), nestedList(MaxValueDepth+1, "1"), `[1,]`, `{"a"}`, `[`, `"`, `tru`, `01`, `1.`, `-`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := valueFromJSON(s)
		if !gjson.Valid(s) {
			return // the renderer checks validity first; here only: no panic
		}
		ref := gjson.Parse(s)
		if d := depthOf(ref); d > MaxValueDepth {
			if err == nil {
				t.Fatalf("depth %d accepted", d)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid JSON %q refused: %v", s, err)
		}
		if err := sameValue(got, referenceValue(ref)); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
	})
}
