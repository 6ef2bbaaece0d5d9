package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// group64 repeats the pattern to fill one group of 64.
func group64(pattern ...float32) []float32 {
	g := make([]float32, 64)
	for i := range g {
		g[i] = pattern[i%len(pattern)]
	}
	return g
}

// codesOf unpacks the codes of row 0 of m.
func codesOf(m *Matrix) []uint32 {
	per, mask := 32/m.Bits, uint32(1)<<m.Bits-1
	codes := make([]uint32, m.Cols)
	for c := range codes {
		codes[c] = m.Words[c/per] >> (uint(m.Bits) * uint(c%per)) & mask
	}
	return codes
}

// Every expected value below is worked out by hand from the algorithm in
// the oracle README; the inputs are chosen so the float32 arithmetic is exact.
func TestQuantizeHandBuiltGroups(t *testing.T) {
	for _, tc := range []struct {
		name         string
		bits         int
		vals         []float32
		scale, bias  uint16   // bf16 bits
		codes        []uint32 // codes of vals[0..len(codes))
		dequantExact bool     // every value is on the grid
	}{
		{
			// |min| > |max|: edge = min = -15, scale = 22.5/15 = 1.5 > 0,
			// q0 = -10. -11.25 sits at code 2.5 and rounds away to 3.
			name: "min dominates", bits: 4,
			vals:  []float32{-15, 7.5, -13.5, 0, -11.25, 6},
			scale: 0x3fc0, bias: 0xc170, // 1.5, -15
			codes: []uint32{0, 15, 1, 10, 3, 14},
		},
		{
			// |max| >= |min|: edge = max = 15, scale = -1.5, q0 = -10.
			// 5.25 sits at code 6.5 and rounds away to 7 (to even: 6).
			name: "max dominates", bits: 4,
			vals:  []float32{15, -7.5, 13.5, 0, 5.25, -6},
			scale: 0xbfc0, bias: 0x4170, // -1.5, 15
			codes: []uint32{0, 15, 1, 10, 7, 14},
		},
		{
			// All zero: scale = -1e-7 (the floor, negated since |min| = |max|),
			// q0 = 0 so the bias is 0. -1e-7 is 0xb3d6bf95 in float32 and
			// rounds up to 0xb3d7 in bf16.
			name: "all zero", bits: 4,
			vals:  []float32{0},
			scale: 0xb3d7, bias: 0,
			codes: []uint32{0, 0}, dequantExact: true,
		},
		{
			// All negative: the running max starts at 0, so the range is
			// [-4, 0], scale = 4/15 (0x3e888889, bf16 0x3e89), q0 = -15 and
			// -1 gets code 11.25 → 11. Starting from max(group) = -1 would
			// give scale 0.2 and code 15.
			name: "max clamped at zero", bits: 4,
			vals:  []float32{-4, -1, -2.5},
			scale: 0x3e89, bias: 0xc080, // 4/15, -4
			codes: []uint32{0, 11},
		},
		{
			// 8-bit, min dominates: scale = 63.75/255 = 0.25, q0 = -255;
			// -38.625 sits at 100.5 and rounds away to 101.
			name: "8-bit tie", bits: 8,
			vals:  []float32{-63.75, 0, -38.625, -63.5},
			scale: 0x3e80, bias: 0xc27f, // 0.25, -63.75
			codes: []uint32{0, 255, 101, 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := group64(tc.vals...)
			m := Quantize(w, 1, 64, tc.bits, 64)
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			if m.Scales[0] != tc.scale || m.Biases[0] != tc.bias {
				t.Errorf("scale %#04x bias %#04x, want %#04x %#04x", m.Scales[0], m.Biases[0], tc.scale, tc.bias)
			}
			codes := codesOf(&m)
			for i, want := range tc.codes {
				if codes[i] != want {
					t.Errorf("value %v: code %d, want %d", w[i], codes[i], want)
				}
			}
			if tc.dequantExact {
				row := make([]float32, 64)
				m.DequantizeRow(0, row)
				for i := range row {
					if row[i] != w[i] {
						t.Errorf("value %v dequantises to %v", w[i], row[i])
					}
				}
			}
		})
	}
}

func TestQuantizePacksElementZeroLowest(t *testing.T) {
	// Codes 0..15 in order: the 4-bit words must read 0x76543210, 0xfedcba98.
	ramp4 := make([]float32, 16)
	for k := range ramp4 {
		ramp4[k] = -15 + 1.5*float32(k)
	}
	ramp4[15] = 7.5
	m := Quantize(group64(ramp4...), 1, 64, 4, 64)
	if m.Words[0] != 0x76543210 || m.Words[1] != 0xfedcba98 {
		t.Errorf("4-bit words %#08x %#08x, want 0x76543210 0xfedcba98", m.Words[0], m.Words[1])
	}
	// 8-bit, codes 0, 1, 2, 3 with scale 0.25 and bias -63.75 (0 is code 255).
	m8 := Quantize(group64(-63.75, -63.5, -63.25, -63, 0), 1, 64, 8, 64)
	if m8.Words[0] != 0x03020100 || m8.Words[1]&0xff != 0xff {
		t.Errorf("8-bit words %#08x %#08x, want 0x03020100 and a low byte 0xff", m8.Words[0], m8.Words[1])
	}
}

// TestQuantizeRoundTrip checks the error bound on random groups: half a step
// inside the grid the codes span, plus the distance to the grid for values
// the rounded scale leaves just outside it (at most one step), plus the bf16
// rounding of scale and bias.
func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, bits := range []int{4, 8} {
		const rows, cols, group = 40, 256, 64
		w := make([]float32, rows*cols)
		for i := range w {
			// Mixed spreads and offsets so both signs of scale occur.
			w[i] = float32(rng.NormFloat64()*0.05 + 0.02*float64(i/cols%5-2))
		}
		m := Quantize(w, rows, cols, bits, group)
		levels := float64(int(1)<<bits - 1)
		row := make([]float32, cols)
		negative, clamped := 0, 0
		for r := range rows {
			m.DequantizeRow(r, row)
			for c := range row {
				g := r*cols/group + c/group
				s, b := float64(BF16(m.Scales[g])), float64(BF16(m.Biases[g]))
				lo, hi := min(b, b+levels*s), max(b, b+levels*s)
				v := float64(w[r*cols+c])
				outside := max(lo-v, v-hi, 0)
				slack := (levels*math.Abs(s)+math.Abs(b))*0x1p-8 + 1e-7
				if outside > 0 {
					clamped++
				}
				if outside > math.Abs(s)+slack {
					t.Fatalf("%d-bit row %d col %d: %v is %g outside the grid, more than a step %g", bits, r, c, v, outside, s)
				}
				if err := math.Abs(float64(row[c]) - v); err > math.Abs(s)/2+outside+slack {
					t.Fatalf("%d-bit row %d col %d: %v dequantises to %v, error %g above %g", bits, r, c, v, row[c], err, math.Abs(s)/2+outside+slack)
				}
			}
		}
		for g := range m.Scales {
			if BF16(m.Scales[g]) < 0 {
				negative++
			}
			vals := w[g*group : (g+1)*group]
			wMin, wMax := vals[0], float32(0)
			for _, v := range vals {
				wMin, wMax = min(wMin, v), max(wMax, v)
			}
			if b := m.Biases[g]; b != ToBF16(wMin) && b != ToBF16(wMax) && b != 0 {
				t.Errorf("%d-bit group %d: bias %v is neither the min %v nor the max %v", bits, g, BF16(b), wMin, wMax)
			}
		}
		if negative == 0 || negative == len(m.Scales) {
			t.Errorf("%d-bit: %d of %d scales negative; the data should give both signs", bits, negative, len(m.Scales))
		}
		t.Logf("%d-bit: %d of %d scales negative, %d values just outside the grid", bits, negative, len(m.Scales), clamped)
	}
}

func TestRandomMatrixIsValidAndPlausible(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, bits := range []int{4, 8} {
		m := RandomMatrix(rng, 3, 17, 192, bits, 64)
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		negative := 0
		for g := range m.Scales {
			s, b := BF16(m.Scales[g]), BF16(m.Biases[g])
			if a := abs32(s); a < 0.004 || a > 0.016 {
				t.Fatalf("scale %v is not about 0.01", s)
			}
			if s < 0 {
				negative++
			}
			if b*s >= 0 {
				t.Fatalf("bias %v has the sign of its scale %v: the grid would not straddle zero", b, s)
			}
		}
		if negative == 0 || negative == len(m.Scales) {
			t.Errorf("%d of %d scales negative, want both signs", negative, len(m.Scales))
		}
		ones := 0
		for _, w := range m.Words {
			for ; w != 0; w &= w - 1 {
				ones++
			}
		}
		if frac := float64(ones) / float64(32*len(m.Words)); frac < 0.45 || frac > 0.55 {
			t.Errorf("%d-bit codes have %.3f of their bits set, want about half", bits, frac)
		}
	}
}
