package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultLengths are the lengths a sweep measures unless told otherwise:
// powers of two from 256 to 128K.
func DefaultLengths() []int {
	var out []int
	for n := 256; n <= 128<<10; n *= 2 {
		out = append(out, n)
	}
	return out
}

// CapLengths keeps the lengths up to limit (all of them when limit is 0);
// when none is that short, limit itself is the one length.
func CapLengths(lengths []int, limit int) []int {
	if limit <= 0 {
		return lengths
	}
	var out []int
	for _, n := range lengths {
		if n <= limit {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = []int{limit}
	}
	return out
}

// ParseLengths reads a comma-separated list such as "256,1K,4k,128K"; a K
// suffix means 1024.
func ParseLengths(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		num, mult := f, 1
		if rest, ok := strings.CutSuffix(strings.ToUpper(f), "K"); ok {
			num, mult = rest, 1024
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bench: length %q is not a positive whole number (like 512 or 4K)", f)
		}
		out = append(out, n*mult)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: no lengths in %q", s)
	}
	return out, nil
}

// FormatLength writes a length the way ParseLengths reads it: multiples of
// 1024 as "4K".
func FormatLength(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return strconv.Itoa(n/1024) + "K"
	}
	return strconv.Itoa(n)
}
