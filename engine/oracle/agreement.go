package oracle

import (
	"math"

	"petal/engine/sample"
)

// The measures of agreement with the reference that the bars of
// shared/oracle/README.md are stated in, computed in float64.

// Margin is a row's top-1 logit minus its top-2: where the reference's
// margin is large, a backend must choose the same token.
func Margin(row []float32) float32 {
	a := int(sample.Argmax(row))
	second := float32(math.Inf(-1))
	for i, v := range row {
		if i != a && v > second {
			second = v
		}
	}
	return row[a] - second
}

// MeanNLL is the mean negative log-likelihood of ids[1:] under logits, V
// values per position.
func MeanNLL(logits []float32, ids []int32, V int) float64 {
	lp := make([]float64, V)
	var total float64
	for t := 0; t+1 < len(ids); t++ {
		sample.LogSoftmax(logits[t*V:(t+1)*V], lp)
		total -= lp[ids[t+1]]
	}
	return total / float64(len(ids)-1)
}

// KL is KL(softmax(p) || softmax(q)): p the reference's logits, q the
// backend's.
func KL(p, q []float32) float64 {
	lp, lq := make([]float64, len(p)), make([]float64, len(q))
	sample.LogSoftmax(p, lp)
	sample.LogSoftmax(q, lq)
	var kl float64
	for i := range lp {
		kl += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return kl
}
