package bench

import (
	"reflect"
	"testing"
)

func TestParseLengths(t *testing.T) {
	got, err := ParseLengths("256, 1K,4k,,128K,1000")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{256, 1024, 4096, 131072, 1000}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"", ",", "x", "0", "-4", "1.5K", "K", "4M"} {
		if _, err := ParseLengths(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFormatLength(t *testing.T) {
	for n, want := range map[int]string{256: "256", 1024: "1K", 1536: "1536", 131072: "128K", 1000: "1000"} {
		if got := FormatLength(n); got != want {
			t.Errorf("FormatLength(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseLengths(FormatLength(n)); err != nil || back[0] != n {
			t.Errorf("%d does not read back: %v %v", n, back, err)
		}
	}
}

func TestDefaultAndCapLengths(t *testing.T) {
	d := DefaultLengths()
	if len(d) != 10 || d[0] != 256 || d[9] != 131072 {
		t.Errorf("default lengths %v", d)
	}
	if got := CapLengths(d, 4096); !reflect.DeepEqual(got, []int{256, 512, 1024, 2048, 4096}) {
		t.Errorf("capped at 4096: %v", got)
	}
	if got := CapLengths(d, 3000); got[len(got)-1] != 2048 {
		t.Errorf("capped at 3000: %v", got)
	}
	if got := CapLengths(d, 100); !reflect.DeepEqual(got, []int{100}) {
		t.Errorf("capped at 100: %v", got)
	}
	if got := CapLengths(d, 0); !reflect.DeepEqual(got, d) {
		t.Errorf("no cap: %v", got)
	}
}
