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
