package cpu

// The chunked delta rule (deltachunk.go) spends its time in small matrix
// products. mulInto computes them a tile of tileRows x tileCols at a time:
// the AVX2 kernel (deltachunk_amd64.s) takes whole tiles, mulTileGo the
// edges and machines without it.

const tileRows, tileCols = 4, 16

// strided is a read-only matrix view: element (i, p) is x[i*row + p*col],
// so a product can read a matrix or its transpose without copying it.
type strided struct {
	x        []float32
	row, col int
}

// from is the view starting at row i.
func (a strided) from(i int) strided { return strided{a.x[i*a.row:], a.row, a.col} }

// rowScales are the per-row factors of mulInto's result: row i becomes
// c(i)*C[i] + r(i)*(A·B)[i], or r(i)*(A·B)[i] when keep is false (then C is
// not read, so it may hold anything). A nil slice means the matching
// constant for every row.
type rowScales struct {
	keep       bool
	c, r       []float32
	cAll, rAll float32
}

func (s *rowScales) at(i int) (c, r float32) {
	c, r = s.cAll, s.rAll
	if s.c != nil {
		c = s.c[i]
	}
	if s.r != nil {
		r = s.r[i]
	}
	return c, r
}

// mulInto: C[i][j] = c(i)*C[i][j] + r(i)*Σ_{p<k} A(i,p)*B[p][j] for i < m,
// j < n, with B and C row-major (ldb, ldc floats per row).
func mulInto(c []float32, ldc int, a strided, b []float32, ldb int, m, n, k int, s rowScales) {
	if m <= 0 || n <= 0 {
		return
	}
	// The bounds the assembly relies on, checked once.
	_ = c[(m-1)*ldc+n-1]
	if k > 0 {
		_ = a.x[(m-1)*a.row+(k-1)*a.col]
		_ = b[(k-1)*ldb+n-1]
	}
	var cs, rs [tileRows]float32
	for i0 := 0; i0 < m; i0 += tileRows {
		rows := min(tileRows, m-i0)
		for i := range rows {
			cs[i], rs[i] = s.at(i0 + i)
		}
		for j0 := 0; j0 < n; j0 += tileCols {
			cols := min(tileCols, n-j0)
			ct := c[i0*ldc+j0:]
			at := strided{a.x[i0*a.row:], a.row, a.col}
			if rows == tileRows && cols == tileCols && k > 0 && mulTileFast(ct, ldc, at, b[j0:], ldb, k, s.keep, &cs, &rs) {
				continue
			}
			mulTileGo(ct, ldc, at, b[j0:], ldb, rows, cols, k, s.keep, &cs, &rs)
		}
	}
}

// mulTileGo is one tile of mulInto (rows <= tileRows, cols <= tileCols)
// in plain Go.
func mulTileGo(c []float32, ldc int, a strided, b []float32, ldb, rows, cols, k int, keep bool, cs, rs *[tileRows]float32) {
	for i := range rows {
		var acc [tileCols]float32
		for p := range k {
			av := a.x[i*a.row+p*a.col]
			for j, bv := range b[p*ldb:][:cols] {
				acc[j] += av * bv
			}
		}
		row := c[i*ldc:][:cols]
		for j := range row {
			v := rs[i] * acc[j]
			if keep {
				v += cs[i] * row[j]
			}
			row[j] = v
		}
	}
}
