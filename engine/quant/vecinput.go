package quant

// VecInput is an input vector laid out for the mat-vec row kernels once, so
// that many row ranges of matrices of one kind (the same columns, bits and
// group size) can be multiplied by it, from several goroutines at once,
// without laying it out again: a caller that splits several matrices (the
// experts of a token, the projections of one input) into blocks of rows for
// its own parallel loop prepares the input once per vector.
type VecInput struct {
	j vecJob
}

// Prepare lays out x for matrices like m. x must stay unchanged while the
// input is used.
func (in *VecInput) Prepare(m *Matrix, x []float32) {
	if len(x) != m.Cols {
		panic("quant: VecInput.Prepare: input length differs from the matrix's columns")
	}
	in.j.prepare(m, x, nil)
}

// Fits reports whether m is of the kind the input was prepared for.
func (in *VecInput) Fits(m *Matrix) bool {
	p := in.j.m
	k := portableKernel
	if !portableOnly {
		k = pickRowKernel(m)
	}
	return p != nil && m.Cols == p.Cols && m.Bits == p.Bits && m.GroupSize == p.GroupSize && k == in.j.kernel
}

// MulRows sets y[i] = W[r0+i]·x for i < r1-r0 (rows of the whole stack),
// on the calling goroutine. m must fit the input.
func (in *VecInput) MulRows(m *Matrix, r0, r1 int, y []float32) {
	if !in.Fits(m) || r0 < 0 || r1 > m.Rows*m.Experts || len(y) < r1-r0 {
		panic("quant: VecInput.MulRows: matrix or rows do not fit the prepared input")
	}
	wr, gr := m.WordsPerRow(), m.GroupsPerRow()
	v := *m
	v.Words, v.Scales, v.Biases = m.Words[r0*wr:r1*wr], m.Scales[r0*gr:r1*gr], m.Biases[r0*gr:r1*gr]
	v.Rows, v.Experts = r1-r0, 1
	if in.j.kernel == portableKernel {
		matVecRowsGo(&v, in.j.x, in.j.xsum, y, 0, r1-r0)
		return
	}
	matVecRowsFast(in.j.kernel, &v, in.j.xk, in.j.xsum, y, 0, r1-r0)
}
