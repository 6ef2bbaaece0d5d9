package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"petal/engine/backend"
	"petal/engine/quant"
)

// TestQLinearGroup: the projections of one input, side by side, are the
// same bits as each matrix alone, one row (the shared loop, with a matrix
// of another kind among them) or several.
func TestQLinearGroup(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	b := New()
	for _, rows := range []int{1, 3} {
		t.Run(fmt.Sprint(rows, " rows"), func(t *testing.T) {
			xs := randomVec(rng, rows*256)
			x := mustBuf(b, xs)
			o := &backend.QLinearGroup{X: x, Rows: rows}
			var want []float32
			for i, n := range []int{67, 5, 130, 9} {
				bits := 4
				if i == 2 {
					bits = 8 // cannot share the 4-bit layout of the input
				}
				m := quant.RandomMatrix(rng, 1, n, 256, bits, 64)
				w, err := b.Upload(m)
				if err != nil {
					t.Fatal(err)
				}
				o.W = append(o.W, w)
				ref := make([]float32, rows*n)
				if rows == 1 {
					quant.MatVec(&m, xs, ref)
				} else {
					quant.MatMul(&m, xs, rows, ref)
				}
				want = append(want, ref...)
			}
			o.Y = mustBuf(b, poison(len(want)))
			if err := backend.RunOnce(b, o); err != nil {
				t.Fatal(err)
			}
			sameBits(t, "group against each matrix alone", F(o.Y), want)
		})
	}
	bad := &backend.QLinearGroup{X: mustBuf(b, make([]float32, 256)), Rows: 1, Y: mustBuf(b, make([]float32, 10))}
	m, _ := b.Upload(quant.RandomMatrix(rng, 1, 11, 256, 4, 64))
	bad.W = []backend.Matrix{m}
	if _, err := b.Compile([]backend.Op{bad}); err == nil {
		t.Error("a group whose outputs overflow Y compiled")
	}
}
