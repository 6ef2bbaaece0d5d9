package cpu

import (
	"math"

	"petal/engine/backend"
	"petal/engine/parallel"
)

// Kernels run their rows through parallel.For with a method value bound
// once (see tasks in cpu.go), so a decode step allocates no closures.

// normTask: h += delta (when given); out = h/rms(h) * weight, per row.
type normTask struct {
	o                *backend.AddRMSNorm
	h, out, w, delta []float32
}

func (b *Backend) addRMSNorm(o *backend.AddRMSNorm) {
	t := &b.tasks.norm
	t.o, t.h, t.out, t.w, t.delta = o, F(o.H), F(o.Out), F(o.Weight), nil
	if o.Delta.Mem != nil {
		t.delta = F(o.Delta)
	}
	parallel.For(o.Rows, 4, b.tasks.normFn)
}

func (t *normTask) run(lo, hi int) {
	D := t.o.Dim
	for r := lo; r < hi; r++ {
		row := t.h[r*D : (r+1)*D]
		if t.delta != nil {
			d := t.delta[r*D : (r+1)*D]
			for i := range row {
				row[i] += d[i]
			}
		}
		rmsNorm(row, t.w, t.out[r*D:(r+1)*D], t.o.Eps)
	}
}

// rmsNorm writes x/sqrt(mean(x²)+eps) * w into out.
func rmsNorm(x, w, out []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	for i, v := range x {
		out[i] = v * inv * w[i]
	}
}

// gatedNormTask: per head, out = x/rms(x) * w * silu(z).
type gatedNormTask struct {
	o            *backend.GatedRMSNorm
	x, z, w, out []float32
}

func (b *Backend) gatedRMSNorm(o *backend.GatedRMSNorm) {
	t := &b.tasks.gatedNorm
	t.o, t.x, t.z, t.w, t.out = o, F(o.X), F(o.Z), F(o.Weight), F(o.Out)
	parallel.For(o.Rows*o.Heads, 16, b.tasks.gatedNormFn)
}

func (t *gatedNormTask) run(lo, hi int) {
	D := t.o.Dim
	for h := lo; h < hi; h++ {
		s := h * D
		rmsNorm(t.x[s:s+D], t.w, t.out[s:s+D], t.o.Eps)
		mulSilu(t.out[s:s+D], t.z[s:s+D])
	}
}
