package cpu

import (
	"math"

	"petal/engine/backend"
	"petal/engine/parallel"
)

// addRMSNorm: h += delta (when given); out = h/rms(h) * weight.
func addRMSNorm(o *backend.AddRMSNorm) {
	h, out, w := F(o.H), F(o.Out), F(o.Weight)
	var delta []float32
	if o.Delta.Mem != nil {
		delta = F(o.Delta)
	}
	parallel.For(o.Rows, 4, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := h[r*o.Dim : (r+1)*o.Dim]
			if delta != nil {
				d := delta[r*o.Dim : (r+1)*o.Dim]
				for i := range row {
					row[i] += d[i]
				}
			}
			rmsNorm(row, w, out[r*o.Dim:(r+1)*o.Dim], o.Eps)
		}
	})
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

// gatedRMSNorm: per head, out = x/rms(x) * w * silu(z).
func gatedRMSNorm(o *backend.GatedRMSNorm) {
	x, z, w, out := F(o.X), F(o.Z), F(o.Weight), F(o.Out)
	heads := o.Rows * o.Heads
	parallel.For(heads, 16, func(lo, hi int) {
		for h := lo; h < hi; h++ {
			s := h * o.Dim
			rmsNorm(x[s:s+o.Dim], w, out[s:s+o.Dim], o.Eps)
			for i := s; i < s+o.Dim; i++ {
				out[i] *= silu(z[i])
			}
		}
	})
}

func silu(x float32) float32    { return x / (1 + float32(math.Exp(float64(-x)))) }
func sigmoid(x float32) float32 { return 1 / (1 + float32(math.Exp(float64(-x)))) }
