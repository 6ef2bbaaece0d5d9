package backend

import "slices"

// DeltaNetStep reports whether ops[i:i+3] is a Gated DeltaNet step of one
// token that a fused kernel may run in one go: ConvSiLU, DeltaRule and
// GatedRMSNorm of one row chained through their outputs, with key and
// value heads of headDim, a conv of width convK, value heads a multiple of
// key heads, and the two intermediate outputs (the conv's and the rule's,
// which such a kernel never writes) read by no other op. Both GPU
// backends' decode lowerings use it; each adds its own kernel's limits.
func DeltaNetStep(ops []Op, i, headDim, convK int) (*ConvSiLU, *DeltaRule, *GatedRMSNorm, bool) {
	if i < 0 || i+2 >= len(ops) {
		return nil, nil, nil, false
	}
	c, ok1 := ops[i].(*ConvSiLU)
	d, ok2 := ops[i+1].(*DeltaRule)
	g, ok3 := ops[i+2].(*GatedRMSNorm)
	if !ok1 || !ok2 || !ok3 || c.Rows != 1 || d.Rows != 1 || g.Rows != 1 || c.Out != d.QKV || d.Out != g.X ||
		c.K != convK || d.KeyDim != headDim || d.ValueDim != headDim || g.Dim != headDim ||
		d.KeyHeads < 1 || d.ValueHeads < d.KeyHeads || d.ValueHeads%d.KeyHeads != 0 || g.Heads != d.ValueHeads ||
		c.Chans != (2*d.KeyHeads+d.ValueHeads)*headDim {
		return nil, nil, nil, false
	}
	if !ReadByOwnProducers(ops, []Buffer{c.Out, d.Out}, i+1, i+2) {
		return nil, nil, nil, false
	}
	return c, d, g, true
}

// ReadByOwnProducers says whether bufs are dead to a fused kernel that
// stands for the ops that write and read them and leaves them unwritten:
// whether every op of ops but those at skip (the fused ones) that reads
// some of bufs (this run's later ops, the next run's earlier ones: the
// model's layers share these buffers) reads what the op just before it
// wrote (readsOwnProducer), as the ops of another such step do.
func ReadByOwnProducers(ops []Op, bufs []Buffer, skip ...int) bool {
	for j, other := range ops {
		if slices.Contains(skip, j) {
			continue
		}
		r, _ := other.Access()
		for _, buf := range r {
			for _, b := range bufs {
				if buf.Overlaps(b) && !readsOwnProducer(ops, j, buf) {
					return false
				}
			}
		}
	}
	return true
}

// readsOwnProducer: op j's read of buf is of the output of op j-1 alone,
// as a DeltaRule reads its ConvSiLU's, a GatedRMSNorm its DeltaRule's and
// a ConvSiLU its in_proj's (a QLinearGroup's).
func readsOwnProducer(ops []Op, j int, buf Buffer) bool {
	if j == 0 {
		return false
	}
	switch o := ops[j].(type) {
	case *ConvSiLU:
		prev, ok := ops[j-1].(*QLinearGroup)
		return ok && buf == o.X && prev.Y.Covers(o.X)
	case *DeltaRule:
		prev, ok := ops[j-1].(*ConvSiLU)
		return ok && buf == o.QKV && prev.Out == o.QKV
	case *GatedRMSNorm:
		prev, ok := ops[j-1].(*DeltaRule)
		return ok && buf == o.X && prev.Out == o.X
	}
	return false
}
