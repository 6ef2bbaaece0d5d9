package metal_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"petal/engine/backend"
	"petal/engine/metal"
)

// The grouped mat-vec and the norm fusions through the backend on a
// device (the CUDA dialect on an NVIDIA GPU here; passed on an H200 in
// docs/bench/metal/2026-12-01-backend2): a QLinearGroup of one token on qmv_group against the CPU backend,
// and norms=fused against norms=apart bit for bit.

// groupCase is the 35B model's Gated DeltaNet input projections of one
// token.
func groupCase() decodeCase {
	return decodeCase{name: "QLinearGroup 35B Gated DeltaNet projections", steps: 1, entries: []string{"qmv_group_f32_r2_sb"},
		build: func(g gen, _ backend.DType) ([]backend.Op, []output) {
			const H = 2048
			rows := []int{8192, 4096, 32, 32}
			var ws []backend.Matrix
			for _, r := range rows {
				ws = append(ws, g.mat(1, r, H, 4))
			}
			y := g.f32(8192+4096+64, 0)
			return []backend.Op{&backend.QLinearGroup{X: g.f32(H, 1), W: ws, Y: y, Rows: 1}}, []output{{"y", y, 1e-4, false}}
		}}
}

func TestQLinearGroupDecode(t *testing.T) {
	runDecodeCase(t, groupCase())
}

// normPair is an AddRMSNorm of one row and the op of one token reading its
// output: the router (route) or the projections; outs are every buffer
// either writes.
func normPair(g gen, route bool, routerBits int, withDelta bool) ([]backend.Op, []backend.Buffer) {
	const H = 2048
	h, x := g.f32(H, 2), g.f32(H, 0)
	n := &backend.AddRMSNorm{H: h, Weight: g.f32(H, 1), Out: x, Rows: 1, Dim: H, Eps: 1e-6}
	if withDelta {
		n.Delta = g.f32(H, 1)
	}
	if route {
		idx, wts := g.ints(make([]int32, 8)...), g.f32(8, 0)
		r := &backend.Route{X: x, Router: g.mat(1, 256, H, routerBits), Idx: idx, Weights: wts, Rows: 1, TopK: 8, Normalize: true}
		return []backend.Op{n, r}, []backend.Buffer{h, x, idx, wts}
	}
	y := g.f32(8192+4096+64, 0)
	ws := []backend.Matrix{g.mat(1, 8192, H, 4), g.mat(1, 4096, H, 4), g.mat(1, 32, H, 4), g.mat(1, 32, H, 4)}
	return []backend.Op{n, &backend.QLinearGroup{X: x, W: ws, Y: y, Rows: 1}}, []backend.Buffer{h, x, y}
}

// TestNormsFusedMatchApart: the norm and the router, the norm and the
// projections, with a delta and without, under norms=fused (the fused
// kernels dispatched) and norms=apart from the same data, run twice (h
// accumulates the delta): every output bit for bit.
func TestNormsFusedMatchApart(t *testing.T) {
	fo := metal.DefaultOptions()
	fo.FusedNorms = true
	fused, apart := openBackend(t, fo), openBackend(t, metal.DefaultOptions())
	for _, c := range []struct {
		name    string
		route   bool
		bits    int
		entries []string
	}{
		{"norm and router", true, 8, []string{"route_logits_norm8", "route_select_norm"}},
		{"norm and 4-bit router", true, 4, []string{"route_logits_norm4", "route_select_norm"}},
		{"norm and projections", false, 4, []string{"qmv_group_norm_f32_r2_sb", "add_rmsnorm"}},
	} {
		for _, withDelta := range []bool{true, false} {
			seed := uint64(200 + len(c.entries[0]) + c.bits)
			fops, fouts := normPair(gen{t, fused, rand.New(rand.NewPCG(seed, 2))}, c.route, c.bits, withDelta)
			aops, aouts := normPair(gen{t, apart, rand.New(rand.NewPCG(seed, 2))}, c.route, c.bits, withDelta)
			p, err := fused.Compile(fops)
			if err != nil {
				t.Fatal(err)
			}
			if got := metal.Entries(p); !slices.Equal(got, c.entries) {
				t.Fatalf("%s: dispatches %q, want %q", c.name, got, c.entries)
			}
			recordLaunched(t, c.entries)
			q, err := apart.Compile(aops)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				if err := q.Run(); err != nil {
					t.Fatal(err)
				}
			}
			for k := range fouts {
				g, w := make([]float32, fouts[k].Len), make([]float32, aouts[k].Len)
				if fouts[k].Type == backend.I32 {
					gi, wi := make([]int32, fouts[k].Len), make([]int32, aouts[k].Len)
					if err := fused.ReadInts(fouts[k], gi); err != nil {
						t.Fatal(err)
					}
					if err := apart.ReadInts(aouts[k], wi); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(gi, wi) {
						t.Errorf("%s delta %v: output %d %v, apart %v", c.name, withDelta, k, gi, wi)
					}
					continue
				}
				if err := fused.Read(fouts[k], g); err != nil {
					t.Fatal(err)
				}
				if err := apart.Read(aouts[k], w); err != nil {
					t.Fatal(err)
				}
				for i := range g {
					if g[i] != w[i] {
						t.Errorf("%s delta %v: output %d element %d is %v, apart %v", c.name, withDelta, k, i, g[i], w[i])
						break
					}
				}
			}
		}
	}
}
