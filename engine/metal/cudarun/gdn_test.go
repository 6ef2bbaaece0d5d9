//go:build linux

package cudarun

import (
	"fmt"
	"math"
	"testing"

	"petal/engine/backend/backendtest"
	"petal/engine/cuda/driver"
	"petal/engine/metal/kernels"
)

const (
	gdnD     = 128 // GDN_D, the head dim of keys and values
	gdnConvK = 4
)

// gdnShapes are engine/cuda's: the 35B model's heads and odd ones.
var gdnShapes = []struct {
	name   string
	hk, hv int
}{{"35B 16k/32v heads", 16, 32}, {"odd 3k/9v heads", 3, 9}, {"odd 2k/2v heads", 2, 2}}

var gdnSplits = []int{1, 2, 4, 8, 16}

func scaled(v []float32, f float32) []float32 {
	for i := range v {
		v[i] *= f
	}
	return v
}

func narrow(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// TestGDNMatchesReference runs three consecutive tokens through
// gdn_step_s<split> and gdn_finish, for every split, from a random state
// and conv state, against the unfused float64 references (ConvSiLU,
// DeltaRule, GatedRMSNorm): each token's output, the state and the conv
// state after it, with engine/cuda's tolerances (output 2e-5 of max|out|,
// state 1e-5, conv state exact); outputs poisoned, guards checked.
func TestGDNMatchesReference(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "gdn")
	rng := freshRNG(t)
	const eps, steps = 1e-6, 3
	for _, sh := range gdnShapes {
		chans := (2*sh.hk + sh.hv) * gdnD
		convW := scaled(randomVector(rng, chans*gdnConvK), 0.5)
		conv0 := randomVector(rng, (gdnConvK-1)*chans)
		aLog, dtBias := make([]float32, sh.hv), randomVector(rng, sh.hv)
		for i := range aLog {
			aLog[i] = float32(math.Log(1 + 15*rng.Float64()))
		}
		normW := randomVector(rng, gdnD)
		for i := range normW {
			normW[i] = 1 + 0.1*normW[i]
		}
		state0 := scaled(randomVector(rng, sh.hv*gdnD*gdnD), 0.1)
		type token struct{ qkv, z, b, a []float32 }
		toks := make([]token, steps)
		for i := range toks {
			toks[i] = token{randomVector(rng, chans), randomVector(rng, sh.hv*gdnD), randomVector(rng, sh.hv), randomVector(rng, sh.hv)}
		}
		refConv := append([]float32(nil), conv0...)
		refState := append([]float32(nil), state0...)
		var wantOut [][]float64
		var wantConv, wantState [][]float32
		for _, tok := range toks {
			cv := narrow(backendtest.ConvSiLU(tok.qkv, refConv, convW, 1, chans, gdnConvK))
			o := narrow(backendtest.DeltaRule(cv, tok.b, tok.a, aLog, dtBias, refState, 1, sh.hk, gdnD, sh.hv, gdnD))
			wantOut = append(wantOut, backendtest.GatedRMSNorm(o, tok.z, normW, 1, sh.hv, gdnD, eps))
			wantConv = append(wantConv, append([]float32(nil), refConv...))
			wantState = append(wantState, append([]float32(nil), refState...))
		}
		qkv, z := newBuf(t, c, s, chans, "qkv"), newBuf(t, c, s, sh.hv*gdnD, "z")
		bb, aa := newBuf(t, c, s, sh.hv, "b"), newBuf(t, c, s, sh.hv, "a")
		convWb := upBuf(t, c, s, convW, "conv weights")
		convState := newBuf(t, c, s, len(conv0), "conv state")
		aLogb, dtBiasb := upBuf(t, c, s, aLog, "A_log"), upBuf(t, c, s, dtBias, "dt_bias")
		normWb := upBuf(t, c, s, normW, "norm weight")
		state := newBuf(t, c, s, len(state0), "state")
		out := newBuf(t, c, s, sh.hv*gdnD, "out")
		p := kernels.GdnParams{Hk: int32(sh.hk), Hv: int32(sh.hv), Eps: eps}
		for _, split := range gdnSplits {
			convState.Set(t, s, conv0)
			state.Set(t, s, state0)
			for i, tok := range toks {
				qkv.Set(t, s, tok.qkv)
				z.Set(t, s, tok.z)
				bb.Set(t, s, tok.b)
				aa.Set(t, s, tok.a)
				out.Poison(t, s)
				args := func() *driver.Args {
					a := new(driver.Args)
					for _, b := range []devBuf{qkv, z, bb, aa, convWb, convState, aLogb, dtBiasb, normWb, state, out} {
						a.Ptr(b.P)
					}
					return withParams(a, p)
				}
				launch(t, s, mod, fmt.Sprintf("gdn_step_s%d", split), sh.hv*split, 256, args())
				launch(t, s, mod, "gdn_finish", sh.hv, 256, args())
				got := out.Floats(t, s, "out")
				gotState := state.Floats(t, s, "state")
				gotConv := convState.Floats(t, s, "conv state")
				eOut, eState := maxRelErr(got, wantOut[i]), maxRelErr(gotState, widen64(wantState[i]))
				convOK := true
				for j := range gotConv {
					if gotConv[j] != wantConv[i][j] {
						convOK = false
						t.Errorf("%s split %d token %d: conv state[%d] = %v, want %v", sh.name, split, i, j, gotConv[j], wantConv[i][j])
						break
					}
				}
				t.Logf("%-20s split %2d token %d: out max error %.2g of max|out|, relative L2 %.2g; state max error %.2g; conv state exact %v",
					sh.name, split, i, eOut, relL2(got, wantOut[i]), eState, convOK)
				if !(eOut <= 2e-5) || !(eState <= 1e-5) {
					t.Errorf("%s split %d token %d: out off by %.2g, state by %.2g (tolerance 2e-5, 1e-5)", sh.name, split, i, eOut, eState)
				}
			}
		}
	}
}
