package checkpoint

import (
	"testing"
)

// Hand-built quantised modules: codes are written byte by byte from the
// format description (spec 3.4), not with the loader's own packing, so the
// test pins nibble order, byte order and the signed scales.

// pack4 packs 4-bit codes: byte k holds code 2k in its low nibble and 2k+1 in its high one.
func pack4(codes []int) []byte {
	out := make([]byte, len(codes)/2)
	for k := range out {
		out[k] = byte(codes[2*k]) | byte(codes[2*k+1])<<4
	}
	return out
}

// pack8 packs 8-bit codes: one byte each, in order.
func pack8(codes []int) []byte {
	out := make([]byte, len(codes))
	for i, c := range codes {
		out[i] = byte(c)
	}
	return out
}

func TestTakeQuantBitOrder(t *testing.T) {
	const rows, cols = 2, 128
	code4 := func(r, c int) int { return (r*7 + c*5) % 16 }
	code8 := func(r, c int) int { return (r*101 + c*37) % 256 }
	var codes4, codes8 []int
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			codes4 = append(codes4, code4(r, c))
			codes8 = append(codes8, code8(r, c))
		}
	}
	// Per row, two groups of 64: negative and positive scales, biases of both signs.
	scales := []float32{-0.5, 0.25, 0.125, -2}
	biases := []float32{3, -1.5, -0.75, 40}
	// Layer 0's router is 8-bit by the test quantization block; the shared expert is 4-bit.
	dir := newCheckpointDir(t, []testTensor{
		{"language_model.model.layers.0.mlp.shared_expert.up_proj.weight", "U32", []int{rows, cols / 8}, pack4(codes4)},
		bf16Tensor("language_model.model.layers.0.mlp.shared_expert.up_proj.scales", []int{rows, 2}, scales...),
		bf16Tensor("language_model.model.layers.0.mlp.shared_expert.up_proj.biases", []int{rows, 2}, biases...),
		{"language_model.model.layers.0.mlp.gate.weight", "U32", []int{rows, cols / 4}, pack8(codes8)},
		bf16Tensor("language_model.model.layers.0.mlp.gate.scales", []int{rows, 2}, scales...),
		bf16Tensor("language_model.model.layers.0.mlp.gate.biases", []int{rows, 2}, biases...),
	})
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	for _, tc := range []struct {
		module string
		bits   int
		code   func(r, c int) int
	}{
		{"model.layers.0.mlp.shared_expert.up_proj", 4, code4},
		{"model.layers.0.mlp.gate", 8, code8},
	} {
		m, err := c.TakeQuant(tc.module, 0, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		if m.Bits != tc.bits {
			t.Errorf("%s: %d bits, want %d", tc.module, m.Bits, tc.bits)
		}
		row := make([]float32, cols)
		for r := 0; r < rows; r++ {
			m.DequantizeRow(r, row)
			for col, got := range row {
				g := r*2 + col/64
				want := float32(tc.code(r, col))*scales[g] + biases[g]
				if got != want {
					t.Fatalf("%s [%d,%d] = %g, want %g (code %d)", tc.module, r, col, got, want, tc.code(r, col))
				}
			}
		}
	}
}

// TestTakeQuantWordValue spells out the little-endian word of codes 0..7.
func TestTakeQuantWordValue(t *testing.T) {
	codes := make([]int, 64)
	for i := range codes {
		codes[i] = i % 16
	}
	dir := newCheckpointDir(t, []testTensor{
		{"language_model.model.layers.1.mlp.gate.weight", "U32", []int{1, 8}, pack4(codes)},
		bf16Tensor("language_model.model.layers.1.mlp.gate.scales", []int{1, 1}, 1),
		bf16Tensor("language_model.model.layers.1.mlp.gate.biases", []int{1, 1}, 0),
	})
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := c.TakeQuant("model.layers.1.mlp.gate", 0, 1, 64)
	if err != nil {
		t.Fatal(err)
	}
	if m.Words[0] != 0x76543210 || m.Words[1] != 0xfedcba98 {
		t.Errorf("words %#x %#x, want 0x76543210 0xfedcba98", m.Words[0], m.Words[1])
	}
	if m.Scales[0] != 0x3f80 || m.Biases[0] != 0 {
		t.Errorf("scale bits %#x bias bits %#x, want bf16 1 and 0", m.Scales[0], m.Biases[0])
	}
}

// TestTakeQuantExperts binds a stack of 3 experts and reads one row of each.
func TestTakeQuantExperts(t *testing.T) {
	const experts, rows, cols = 3, 2, 64
	var codes []int
	for e := 0; e < experts; e++ {
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				codes = append(codes, (e*3+r+c)%16)
			}
		}
	}
	scales := []float32{1, 2, -1, -2, 0.5, -0.5}
	biases := []float32{0, 1, 2, 3, 4, 5}
	dir := newCheckpointDir(t, []testTensor{
		{"language_model.model.layers.2.mlp.switch_mlp.up_proj.weight", "U32", []int{experts, rows, cols / 8}, pack4(codes)},
		bf16Tensor("language_model.model.layers.2.mlp.switch_mlp.up_proj.scales", []int{experts, rows, 1}, scales...),
		bf16Tensor("language_model.model.layers.2.mlp.switch_mlp.up_proj.biases", []int{experts, rows, 1}, biases...),
	})
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := c.TakeQuant("model.layers.2.mlp.switch_mlp.up_proj", experts, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, cols)
	for e := 0; e < experts; e++ {
		ex := m.Expert(e)
		ex.DequantizeRow(1, row)
		k := e*rows + 1
		for col, got := range row {
			if want := float32((e*3+1+col)%16)*scales[k] + biases[k]; got != want {
				t.Fatalf("expert %d row 1 col %d = %g, want %g", e, col, got, want)
			}
		}
	}
	if u := c.Unused(); len(u) != 0 {
		t.Errorf("unused %v after TakeQuant", u)
	}
}
