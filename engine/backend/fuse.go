package backend

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
	// The intermediates are dead if every op that reads them (this run's
	// later ops, the next run's earlier ones: the model's layers share
	// these buffers) reads what the op just before it wrote, as the rule
	// and the norm of such a step do.
	for j, other := range ops {
		if j == i+1 || j == i+2 {
			continue
		}
		r, _ := other.Access()
		for _, buf := range r {
			if (buf.Overlaps(c.Out) || buf.Overlaps(d.Out)) && !readsOwnProducer(ops, j, buf) {
				return nil, nil, nil, false
			}
		}
	}
	return c, d, g, true
}

// readsOwnProducer: op j's read of buf is of the output of op j-1 alone,
// as a DeltaRule reads its ConvSiLU's and a GatedRMSNorm its DeltaRule's.
func readsOwnProducer(ops []Op, j int, buf Buffer) bool {
	if j == 0 {
		return false
	}
	switch o := ops[j].(type) {
	case *DeltaRule:
		prev, ok := ops[j-1].(*ConvSiLU)
		return ok && buf == o.QKV && prev.Out == o.QKV
	case *GatedRMSNorm:
		prev, ok := ops[j-1].(*DeltaRule)
		return ok && buf == o.X && prev.Out == o.X
	}
	return false
}
