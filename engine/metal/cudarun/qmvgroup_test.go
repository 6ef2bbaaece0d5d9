//go:build linux

package cudarun

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"petal/engine/backend/backendtest"
	"petal/engine/cuda/driver"
	"petal/engine/metal/kernels"
	"petal/engine/quant"
)

// qmvGroupShapes are QLinearGroups of one token: the 35B model's Gated
// DeltaNet input projections (qkv, z, b, a) and attention's q/k/v, and
// odd ones off the warp and group boundaries, with two and three
// matrices.
var qmvGroupShapes = []struct {
	name string
	rows []int
	cols int
}{
	{"35B gdn in_proj qkv/z/b/a x2048", []int{8192, 4096, 32, 32}, 2048},
	{"35B attn q/k/v x2048", []int{8192, 512, 512}, 2048},
	{"odd 7/513 x192", []int{7, 513}, 192},
	{"odd 1/3/65/2 x2112", []int{1, 3, 65, 2}, 2112},
}

// groupParams is the QmvGroupParams of matrices of rows rows each.
func groupParams(rows []int, cols, team int) kernels.QmvGroupParams {
	var start [5]int32
	n := 0
	for i := range 4 {
		start[i] = int32(n)
		if i < len(rows) {
			n += rows[i]
		}
	}
	start[4] = int32(n)
	return kernels.QmvGroupParams{Start0: start[0], Start1: start[1], Start2: start[2], Start3: start[3], End: start[4],
		N: int32(len(rows)), Cols: int32(cols), Team: int32(team)}
}

// groupArgs binds the group's matrices, slots past them bound to matrix
// 0's buffers (valid, never read).
func groupArgs(qs []qmat, ys []devBuf) *driver.Args {
	slot := func(i int) int {
		if i < len(qs) {
			return i
		}
		return 0
	}
	a := new(driver.Args)
	for i := range 4 {
		a.Ptr(qs[slot(i)].words.P)
	}
	for i := range 4 {
		a.Ptr(qs[slot(i)].sb.P)
	}
	for i := range 4 {
		a.Ptr(ys[slot(i)].P)
	}
	return a
}

// TestQMVGroupMatchesReference runs qmv_group_f32_r2_sb over every group
// shape and team size on a full grid and on two threadgroups (the
// persistent loop across the matrices' boundaries), outputs poisoned and
// guarded: each matrix's rows within engine/cuda's 1e-5 of Σ|w·x| of the
// float64 reference, and bit for bit what qmv_f32_r2_sb gives that matrix
// alone (the same arithmetic in the same order).
func TestQMVGroupMatchesReference(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "qmv")
	rng := freshRNG(t)
	for _, sh := range qmvGroupShapes {
		x := randomVector(rng, sh.cols)
		xb := upBuf(t, c, s, x, "x")
		var qs []qmat
		var ys, alone []devBuf
		var wants, sums [][]float64
		total := 0
		for i, r := range sh.rows {
			m := quant.RandomMatrix(rng, 1, r, sh.cols, 4, 64)
			qs = append(qs, uploadQ(t, c, s, &m, fmt.Sprintf("%s matrix %d", sh.name, i)))
			ys = append(ys, newBuf(t, c, s, r, fmt.Sprintf("y%d", i)))
			alone = append(alone, newBuf(t, c, s, r, fmt.Sprintf("y%d alone", i)))
			want, sum := matVec64(&m, x)
			wants, sums = append(wants, want), append(sums, sum)
			total += r
		}
		for _, team := range teams(sh.cols / 64) {
			perGroup := 8 * (32 / team) * 2
			for i, r := range sh.rows {
				alone[i].Poison(t, s)
				a := new(driver.Args).Ptr(qs[i].words.P).Ptr(qs[i].sb.P).Ptr(qs[i].biases.P).Ptr(xb.P).Ptr(alone[i].P)
				launch(t, s, mod, "qmv_f32_r2_sb", ceilDiv(r, perGroup), qmvThreads,
					withParams(a, kernels.QmvParams{Rows: int32(r), Cols: int32(sh.cols), Team: int32(team)}))
			}
			for _, grid := range []int{ceilDiv(total, perGroup), 2} {
				for _, y := range ys {
					y.Poison(t, s)
				}
				a := groupArgs(qs, ys).Ptr(xb.P)
				launch(t, s, mod, "qmv_group_f32_r2_sb", grid, qmvThreads, withParams(a, groupParams(sh.rows, sh.cols, team)))
				for i := range sh.rows {
					label := fmt.Sprintf("%s matrix %d team %d grid %d", sh.name, i, team, grid)
					got := ys[i].Floats(t, s, label)
					worst, at := 0.0, 0
					for r := range wants[i] {
						if v := math.Abs(float64(got[r])-wants[i][r]) / max(sums[i][r], 1e-30); v > worst {
							worst, at = v, r
						}
					}
					if !(worst <= 1e-5) {
						t.Errorf("%s: row %d: got %v, want %v (error %.2g of Σ|w·x|, tolerance 1e-5)", label, at, got[at], wants[i][at], worst)
					}
					if one := alone[i].Words(t, s, label+" alone"); !slices.Equal(ys[i].Words(t, s, label), one) {
						t.Errorf("%s: not bit for bit qmv_f32_r2_sb's", label)
					}
				}
			}
		}
	}
}

// TestQMVGroupNormMatchesApart runs qmv_group_norm_f32_r2_sb and then,
// as the lowering does after a barrier, add_rmsnorm's write-back, against
// add_rmsnorm then qmv_group_f32_r2_sb, with and without a delta: y, h
// and the normed row bit for bit, every output poisoned first; and the
// normed row against the float64 AddRMSNorm, each matrix's y against the
// float64 mat-vec of that row (1e-5 of Σ|w·x|).
func TestQMVGroupNormMatchesApart(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod, ops := module(t, c, "qmv"), module(t, c, "ops")
	rng := freshRNG(t)
	const eps = 1e-6
	for _, sh := range qmvGroupShapes {
		var qs []qmat
		var ms []quant.Matrix
		var fusedY, apartY []devBuf
		total := 0
		for i, r := range sh.rows {
			m := quant.RandomMatrix(rng, 1, r, sh.cols, 4, 64)
			ms = append(ms, m)
			qs = append(qs, uploadQ(t, c, s, &m, fmt.Sprintf("%s matrix %d", sh.name, i)))
			fusedY = append(fusedY, newBuf(t, c, s, r, fmt.Sprintf("fused y%d", i)))
			apartY = append(apartY, newBuf(t, c, s, r, fmt.Sprintf("apart y%d", i)))
			total += r
		}
		team := maxTeam(sh.cols / 64)
		grid := ceilDiv(total, 8*(32/team)*2)
		for _, withDelta := range []bool{false, true} {
			h, w := randScaled(rng, sh.cols, 2), randScaled(rng, sh.cols, 1)
			delta := make([]float32, sh.cols)
			var refDelta []float32
			hasDelta := int32(0)
			if withDelta {
				delta, hasDelta = randScaled(rng, sh.cols, 1), 1
				refDelta = delta
			}
			db, wb := upBuf(t, c, s, delta, "delta"), upBuf(t, c, s, w, "w")
			label := fmt.Sprintf("%s delta %v", sh.name, withDelta)

			// apart: add_rmsnorm, then the grouped mat-vec of its output
			hA, xA := upBuf(t, c, s, h, "h apart"), newBuf(t, c, s, sh.cols, "x apart")
			for _, y := range apartY {
				y.Poison(t, s)
			}
			launch(t, s, ops, "add_rmsnorm", 1, 256, withParams(new(driver.Args).Ptr(hA.P).Ptr(db.P).Ptr(wb.P).Ptr(xA.P),
				kernels.NormParams{Dim: int32(sh.cols), HasDelta: hasDelta, Eps: eps}))
			launch(t, s, mod, "qmv_group_f32_r2_sb", grid, qmvThreads,
				withParams(groupArgs(qs, apartY).Ptr(xA.P), groupParams(sh.rows, sh.cols, team)))

			// fused: the mat-vec forms x itself; add_rmsnorm writes h and x back
			hF, xF := upBuf(t, c, s, h, "h fused"), newBuf(t, c, s, sh.cols, "x fused")
			for _, y := range fusedY {
				y.Poison(t, s)
			}
			p := groupParams(sh.rows, sh.cols, team)
			p.HasDelta, p.Eps = hasDelta, eps
			launch(t, s, mod, "qmv_group_norm_f32_r2_sb", grid, qmvThreads,
				withParams(groupArgs(qs, fusedY).Ptr(hF.P).Ptr(db.P).Ptr(wb.P), p))
			// h is only read: another threadgroup may not have read it yet
			if !slices.Equal(hF.Words(t, s, "h fused"), bitsOf(h)) {
				t.Errorf("%s: qmv_group_norm wrote h", label)
			}
			launch(t, s, ops, "add_rmsnorm", 1, 256, withParams(new(driver.Args).Ptr(hF.P).Ptr(db.P).Ptr(wb.P).Ptr(xF.P),
				kernels.NormParams{Dim: int32(sh.cols), HasDelta: hasDelta, Eps: eps}))

			for i := range sh.rows {
				if !slices.Equal(fusedY[i].Words(t, s, "fused y"), apartY[i].Words(t, s, "apart y")) {
					t.Errorf("%s matrix %d: y not bit for bit add_rmsnorm + qmv_group's", label, i)
				}
			}
			if !slices.Equal(hF.Words(t, s, "h"), hA.Words(t, s, "h")) || !slices.Equal(xF.Words(t, s, "x"), xA.Words(t, s, "x")) {
				t.Errorf("%s: h or x not bit for bit add_rmsnorm's", label)
			}
			hRef := slices.Clone(h)
			want := backendtest.AddRMSNorm(hRef, refDelta, w, 1, sh.cols, eps)
			xGot := xF.Floats(t, s, "x")
			checkBar(t, label+" x", xGot, want, bar("AddRMSNorm"))
			checkBar(t, label+" h", hF.Floats(t, s, "h"), widen64(hRef), 0)
			for i := range sh.rows {
				wantY, sum := matVec64(&ms[i], xGot)
				got := fusedY[i].Floats(t, s, "y")
				for r := range wantY {
					if v := math.Abs(float64(got[r])-wantY[r]) / max(sum[r], 1e-30); !(v <= 1e-5) {
						t.Errorf("%s matrix %d row %d: got %v, want %v (error %.2g of Σ|w·x|)", label, i, r, got[r], wantY[r], v)
						break
					}
				}
			}
		}
	}
}

// bitsOf is v's float32 bits.
func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, f := range v {
		out[i] = math.Float32bits(f)
	}
	return out
}
