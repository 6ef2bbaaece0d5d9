package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"petal/engine/backend/backendtest"
)

type gdnShape struct {
	name   string
	hk, hv int
}

var gdnShapes = []gdnShape{
	{"35B 16k/32v heads", 16, 32},
	{"odd 3k/9v heads", 3, 9},
	{"odd 2k/2v heads", 2, 2},
}

// gdnLayer is one layer's parameters and starting state on the host.
type gdnLayer struct {
	hk, hv, chans                  int
	convW, convState, aLog, dtBias []float32
	normW, state                   []float32
}

func randomGDNLayer(rng *rand.Rand, hk, hv int) *gdnLayer {
	D := GDNHeadDim
	L := &gdnLayer{hk: hk, hv: hv, chans: (2*hk + hv) * D}
	L.convW = scaled(randomVector(rng, L.chans*GDNConvK), 0.5)
	L.convState = randomVector(rng, (GDNConvK-1)*L.chans)
	L.aLog, L.dtBias = make([]float32, hv), randomVector(rng, hv)
	for i := range L.aLog {
		L.aLog[i] = float32(math.Log(1 + 15*rng.Float64()))
	}
	L.normW = randomVector(rng, D)
	for i := range L.normW {
		L.normW[i] = 1 + 0.1*L.normW[i]
	}
	L.state = scaled(randomVector(rng, hv*D*D), 0.1)
	return L
}

func scaled(v []float32, f float32) []float32 {
	for i := range v {
		v[i] *= f
	}
	return v
}

// gdnToken is one token's projections.
type gdnToken struct{ qkv, z, b, a []float32 }

func randomGDNToken(rng *rand.Rand, L *gdnLayer) gdnToken {
	return gdnToken{randomVector(rng, L.chans), randomVector(rng, L.hv*GDNHeadDim), randomVector(rng, L.hv), randomVector(rng, L.hv)}
}

// gdnReference advances the host conv state and state by one token and
// returns the layer's output before out_proj, in float64, from the
// unfused references: ConvSiLU, DeltaRule, GatedRMSNorm.
func gdnReference(L *gdnLayer, tok gdnToken, convState, state []float32, eps float32) []float64 {
	D := GDNHeadDim
	conv := backendtest.ConvSiLU(tok.qkv, convState, L.convW, 1, L.chans, GDNConvK)
	qkv := make([]float32, len(conv))
	for i, v := range conv {
		qkv[i] = float32(v)
	}
	o := backendtest.DeltaRule(qkv, tok.b, tok.a, L.aLog, L.dtBias, state, 1, L.hk, D, L.hv, D)
	o32 := make([]float32, len(o))
	for i, v := range o {
		o32[i] = float32(v)
	}
	return backendtest.GatedRMSNorm(o32, tok.z, L.normW, 1, L.hv, D, eps)
}

// TestGDNMatchesReference runs three consecutive tokens through every split
// of the Gated DeltaNet kernel from a random state and conv state, against
// the float64 references, checking each token's output, the state and the
// conv state after each; outputs poisoned, guards checked.
func TestGDNMatchesReference(t *testing.T) {
	c := gpu(t)
	s := newTestStream(t, c)
	k, err := NewGDN(loadModule(t, LoadGDNModule, c))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.AddClusterForms(loadModule(t, LoadGDNClusterModule, c)); err != nil {
		t.Fatal(err)
	}
	// every split with the ticket's gated norm, then the cluster forms
	type form struct {
		split   int
		cluster bool
	}
	var forms []form
	for _, n := range GDNSplits {
		forms = append(forms, form{n, false})
	}
	for _, n := range GDNClusterSplits {
		forms = append(forms, form{n, true})
	}
	rng := freshRNG(t)
	const eps, steps = 1e-6, 3
	for _, sh := range gdnShapes {
		L := randomGDNLayer(rng, sh.hk, sh.hv)
		toks := make([]gdnToken, steps)
		for i := range toks {
			toks[i] = randomGDNToken(rng, L)
		}
		// The reference's outputs and states after each token.
		refConv := append([]float32(nil), L.convState...)
		refState := append([]float32(nil), L.state...)
		var wantOut [][]float64
		var wantConv, wantState [][]float32
		for _, tok := range toks {
			wantOut = append(wantOut, gdnReference(L, tok, refConv, refState, eps))
			wantConv = append(wantConv, append([]float32(nil), refConv...))
			wantState = append(wantState, append([]float32(nil), refState...))
		}
		D := GDNHeadDim
		qkv, z := newBuf(t, c, s, L.chans, "qkv"), newBuf(t, c, s, L.hv*D, "z")
		bb, aa := newBuf(t, c, s, L.hv, "b"), newBuf(t, c, s, L.hv, "a")
		convW := upBuf(t, c, s, L.convW, "conv weights")
		convState := newBuf(t, c, s, len(L.convState), "conv state")
		aLog, dtBias := upBuf(t, c, s, L.aLog, "A_log"), upBuf(t, c, s, L.dtBias, "dt_bias")
		normW := upBuf(t, c, s, L.normW, "norm weight")
		state := newBuf(t, c, s, len(L.state), "state")
		out := newBuf(t, c, s, L.hv*D, "out")
		counters := newBuf(t, c, s, sh.hk+sh.hv, "counters")
		if err := s.Fill32(counters.P, 0, int64(counters.N)); err != nil {
			t.Fatal(err)
		}
		for _, f := range forms {
			split := f.split
			k.Split, k.Cluster = split, f.cluster
			convState.Set(t, s, L.convState)
			state.Set(t, s, L.state)
			for i, tok := range toks {
				qkv.Set(t, s, tok.qkv)
				z.Set(t, s, tok.z)
				bb.Set(t, s, tok.b)
				aa.Set(t, s, tok.a)
				out.Poison(t, s)
				b := GDNBuffers{QKV: qkv.P, Z: z.P, B: bb.P, A: aa.P, ConvW: convW.P, ConvState: convState.P,
					ALog: aLog.P, DtBias: dtBias.P, NormW: normW.P, State: state.P, Out: out.P, Counters: counters.P}
				if err := k.Launch(s, b, sh.hk, sh.hv, eps); err != nil {
					t.Fatal(err)
				}
				got := out.Floats(t, s, "out")
				gotState := state.Floats(t, s, "state")
				gotConv := convState.Floats(t, s, "conv state")
				for i, w := range counters.Words(t, s, "counters") {
					if w != 0 {
						t.Fatalf("%s split %d (cluster %v): counter %d left at %d", sh.name, split, f.cluster, i, w)
					}
				}
				st64 := make([]float64, len(wantState[i]))
				for j, v := range wantState[i] {
					st64[j] = float64(v)
				}
				eOut, eState := maxRelErr(got, wantOut[i]), maxRelErr(gotState, st64)
				convOK := true
				for j := range gotConv {
					if gotConv[j] != wantConv[i][j] {
						convOK = false
						t.Errorf("%s split %d (cluster %v) token %d: conv state[%d] = %v, want %v", sh.name, split, f.cluster, i, j, gotConv[j], wantConv[i][j])
						break
					}
				}
				t.Logf("%-20s split %2d cluster %-5v token %d: out max error %.2g of max|out|, relative L2 %.2g; state max error %.2g; conv state exact %v",
					sh.name, split, f.cluster, i, eOut, relL2(got, wantOut[i]), eState, convOK)
				if !(eOut <= 2e-5) || !(eState <= 1e-5) {
					t.Errorf("%s split %d (cluster %v) token %d: out off by %.2g, state by %.2g (tolerance 2e-5, 1e-5)", sh.name, split, f.cluster, i, eOut, eState)
				}
			}
		}
	}
}
