package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"petal/engine/backend"
	"petal/engine/quant"
)

// TestSharedInputLinears: one-row projections of one input run together and
// give what each gives alone; an op that reads another's output is not
// grouped with it.
func TestSharedInputLinears(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	b := New()
	x, _ := b.Alloc(256, backend.F32)
	xs := make([]float32, 256)
	for i := range xs {
		xs[i] = rng.Float32()*2 - 1
	}
	b.Write(x, xs)
	var ops []backend.Op
	var want [][]float32
	for _, rows := range []int{67, 5, 130} {
		m := quant.RandomMatrix(rng, 1, rows, 256, 4, 64)
		w, _ := b.Upload(m)
		y, _ := b.Alloc(rows, backend.F32)
		poison := make([]float32, rows)
		for i := range poison {
			poison[i] = float32(math.NaN())
		}
		b.Write(y, poison)
		ops = append(ops, &backend.QLinear{X: x, W: w, Y: y, Rows: 1})
		ref := make([]float32, rows)
		quant.MatVec(&m, xs, ref)
		want = append(want, ref)
	}
	if n := sharedInputLinears(ops); n != 3 {
		t.Fatalf("%d ops grouped, want 3", n)
	}
	if err := b.Run(ops...); err != nil {
		t.Fatal(err)
	}
	for i, op := range ops {
		got := F(op.(*backend.QLinear).Y)
		for r := range got {
			if got[r] != want[i][r] {
				t.Fatalf("op %d row %d: %g, alone %g", i, r, got[r], want[i][r])
			}
		}
	}
	chained := append(ops[:1:1], &backend.QLinear{X: x, W: ops[0].(*backend.QLinear).W, Y: x.View(0, 67), Rows: 1})
	if n := sharedInputLinears(chained); n != 1 {
		t.Errorf("an op writing the shared input was grouped (%d)", n)
	}
}
