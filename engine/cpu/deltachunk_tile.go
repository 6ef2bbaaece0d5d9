package cpu

// The chunked delta rule (deltachunk.go) spends its time in small matrix
// products. mulInto computes them a tile of up to tileRows x tileCols at a
// time: the AVX2 kernel (deltachunk_amd64.s) takes each row of tiles
// tileCols wide, mulTileGo the narrower edge and machines without it.

const tileRows, tileCols = 4, 16

// strided is a read-only matrix view: element (i, p) is x[i*row + p*col],
// so a product can read a matrix or its transpose without copying it.
type strided struct {
	x        []float32
	row, col int
}

// from is the view starting at row i.
func (a strided) from(i int) strided { return strided{a.x[i*a.row:], a.row, a.col} }

// rowScales say what mulInto makes of the product: row i of the result is
// r(i)*(A·B)[i], plus c(i)*Base[i] with keep. Base is src (lds floats a
// row) or, when src is nil, C itself; without keep nothing is read from
// C, so it may hold anything. A nil c or r means cAll or rAll for every row.
type rowScales struct {
	keep       bool
	src        []float32
	lds        int
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

// mulInto: C[i][j] = r(i)*Σ_{p<k} A(i,p)*B[p][j] (+ c(i)*Base[i][j]) for
// i < m, j < n, with B and C row-major (ldb, ldc floats per row).
func mulInto(c []float32, ldc int, a strided, b []float32, ldb int, m, n, k int, s rowScales) {
	if m <= 0 || n <= 0 {
		return
	}
	src, lds := c, ldc
	if s.src != nil {
		src, lds = s.src, s.lds
	}
	// The bounds the assembly relies on, checked once.
	_ = c[(m-1)*ldc+n-1]
	_ = src[(m-1)*lds+n-1]
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
		at := strided{a.x[i0*a.row:], a.row, a.col}
		j0 := 0
		if tiles := n / tileCols; tiles > 0 && k > 0 &&
			mulPanelFast(c[i0*ldc:], ldc, src[i0*lds:], lds, at, b, ldb, k, rows, tiles, s.keep, &cs, &rs) {
			j0 = tiles * tileCols
		}
		for ; j0 < n; j0 += tileCols {
			cols := min(tileCols, n-j0)
			mulTileGo(c[i0*ldc+j0:], ldc, src[i0*lds+j0:], lds, at, b[j0:], ldb, rows, cols, k, s.keep, &cs, &rs)
		}
	}
}

// mulTileGo is one tile of mulInto (rows <= tileRows, cols <= tileCols)
// in plain Go.
func mulTileGo(c []float32, ldc int, src []float32, lds int, a strided, b []float32, ldb, rows, cols, k int, keep bool, cs, rs *[tileRows]float32) {
	for i := range rows {
		var acc [tileCols]float32
		for p := range k {
			av := a.x[i*a.row+p*a.col]
			for j, bv := range b[p*ldb:][:cols] {
				acc[j] += av * bv
			}
		}
		row, base := c[i*ldc:][:cols], src[i*lds:][:cols]
		for j := range row {
			v := rs[i] * acc[j]
			if keep {
				v += cs[i] * base[j]
			}
			row[j] = v
		}
	}
}

// transpose writes the rows x cols matrix src (lds floats a row) into dst
// as cols x rows (ldd floats a row): whole 8x8 blocks in assembly where
// there is some, the rest in Go.
func transpose(dst []float32, ldd int, src []float32, lds int, rows, cols int) {
	r8, c8 := rows&^7, cols&^7
	if r8 == 0 || c8 == 0 || !transpose8Fast(dst, ldd, src, lds, r8/8) {
		r8, c8 = 0, 0
	}
	for c0 := 8; c0 < c8; c0 += 8 {
		transpose8Fast(dst[c0*ldd:], ldd, src[c0:], lds, r8/8)
	}
	for r := range rows {
		from := 0
		if r < r8 {
			from = c8
		}
		for c, x := range src[r*lds+from : r*lds+cols] {
			dst[(from+c)*ldd+r] = x
		}
	}
}
