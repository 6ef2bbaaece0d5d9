package backend

import (
	"reflect"
	"testing"
)

type mem struct{ name string }

func (*mem) Backend() string { return "test" }

// TestDependencies: read-after-write, write-after-read and write-after-write
// on overlapping views are found; disjoint views of one allocation are not.
func TestDependencies(t *testing.T) {
	a := Buffer{Mem: &mem{"a"}, Len: 100}
	b := Buffer{Mem: &mem{"b"}, Len: 100}
	lo, hi := a.View(0, 50), a.View(50, 50)
	ops := []Op{
		&QLinear{X: b, Y: lo, Rows: 1},                    // 0 writes a[0:50]
		&QLinear{X: b, Y: hi, Rows: 1},                    // 1 writes a[50:100]: independent of 0
		&AddRMSNorm{H: lo, Weight: b, Out: b.View(0, 10)}, // 2 reads a[0:50] (after 0), writes b[0:10] (after 0, 1 read b)
		&QLinear{X: a, Y: b.View(90, 10), Rows: 1},        // 3 reads all of a (after 0, 1), writes b[90:] (after 2 read b)
		&QLinear{X: b.View(50, 10), Y: hi, Rows: 1},       // 4 overwrites a[50:] (after 1, and 3 read it) and reads b[50:60], which 2 and 3 leave alone
	}
	got := Dependencies(ops)
	want := [][]int{nil, nil, {1, 0}, {2}, {3}} // 3 waits for 0 and 1 through 2; 4 for 1 through 3
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("dependencies %v, want %v", got, want)
	}
	if lo.Overlaps(hi) || !a.Overlaps(hi) || a.Overlaps(b) {
		t.Error("Overlaps is wrong")
	}
}

func TestViewBounds(t *testing.T) {
	a := Buffer{Mem: &mem{}, Len: 10}
	defer func() {
		if recover() == nil {
			t.Error("a view past the end did not panic")
		}
	}()
	a.View(5, 6)
}

func TestParseSpec(t *testing.T) {
	sp, err := ParseSpec("CPU:delta=chunked, delta-chunk=32")
	if err != nil || sp.Name != "cpu" || !reflect.DeepEqual(sp.Options, []Option{{"delta", "chunked"}, {"delta-chunk", "32"}}) {
		t.Errorf("ParseSpec: %+v, %v", sp, err)
	}
	if sp, err := ParseSpec("cpu"); err != nil || sp.Name != "cpu" || sp.Options != nil {
		t.Errorf("ParseSpec(cpu): %+v, %v", sp, err)
	}
	for _, bad := range []string{":delta=x", "cpu:delta", "cpu:delta=a,delta=b", "cpu:=3"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) accepted", bad)
		}
	}
}

// TestOptionReaders: Is, On and KVType read their values and name the
// backend, the option and what they want otherwise.
func TestOptionReaders(t *testing.T) {
	o := Option{Key: "gemm", Value: "plain"}
	if v, err := o.Is("cuda", "tc", "plain"); v || err != nil {
		t.Errorf("gemm=plain as tc|plain: %v, %v", v, err)
	}
	if _, err := (Option{Key: "gemm", Value: "fast"}).Is("cuda", "tc", "plain"); err == nil || err.Error() != `cuda: gemm="fast": want tc or plain` {
		t.Errorf("gemm=fast: %v", err)
	}
	for v, want := range map[string]bool{"on": true, "true": true, "1": true, "off": false, "false": false, "0": false} {
		if got, err := (Option{Key: "graphs", Value: v}).On("cuda"); got != want || err != nil {
			t.Errorf("graphs=%s: %v, %v", v, got, err)
		}
	}
	if _, err := (Option{Key: "graphs", Value: "yes"}).On("metal"); err == nil || err.Error() != `metal: graphs="yes": want on or off` {
		t.Errorf("graphs=yes: %v", err)
	}
	if kv, err := (Option{Key: "kv", Value: "bf16"}).KVType("cpu"); kv != BF16 || err != nil {
		t.Errorf("kv=bf16: %v, %v", kv, err)
	}
	if _, err := (Option{Key: "kv", Value: "f16"}).KVType("cpu"); err == nil || err.Error() != `cpu: kv="f16": the KV cache is f32 or bf16` {
		t.Errorf("kv=f16: %v", err)
	}
}
