package bench

import (
	"math/rand/v2"

	"petal/engine/backend"
	"petal/engine/model"
)

// randomState is a state of n tokens with random contents in the ranges a
// real one holds: normalised keys, modest values, a small recurrent state.
// Decode time does not depend on the values, only on the sizes, so this
// stands in for a prefill of n tokens at a fraction of the cost. Import
// copies what it is given, so every full-attention layer shares one random
// K and one V, and every DeltaNet layer one conv and one recurrent state:
// the host holds one layer's worth whatever the depth. K and V hold values
// of the element type kv of the model's caches.
func randomState(d *model.Dims, kv backend.DType, n int, rng *rand.Rand) model.StateData {
	kvWidth := d.KVHeads * d.HeadDim
	k := uniform(rng, n*kvWidth, 1)
	v := uniform(rng, n*kvWidth, 0.5)
	for i := range k {
		k[i], v[i] = backend.Round(kv, k[i]), backend.Round(kv, v[i])
	}
	conv := uniform(rng, (d.ConvK-1)*d.ConvChannels(), 0.5)
	recur := uniform(rng, d.ValueHeads*d.ValueDim*d.KeyDim, 0.05)
	data := model.StateData{
		Tokens: make([]int32, n),
		KV:     kv,
		K:      make([][]float32, d.Layers), V: make([][]float32, d.Layers),
		Conv: make([][]float32, d.Layers), Recur: make([][]float32, d.Layers),
	}
	for i := range data.Tokens {
		data.Tokens[i] = int32(rng.IntN(d.Vocab))
	}
	for i, full := range d.Full {
		if full {
			data.K[i], data.V[i] = k, v
		} else {
			data.Conv[i], data.Recur[i] = conv, recur
		}
	}
	return data
}

// uniform draws n values from U(-a, a).
func uniform(rng *rand.Rand, n int, a float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = a * (2*rng.Float32() - 1)
	}
	return x
}
