//go:build !purego

#include "textflag.h"

// func mulPanelAVX2(c *float32, ldc int, src *float32, lds int, a *float32, lda, astep int, b *float32, ldb, k, rows, tiles int, keep bool, cs, rs *[4]float32)
//
// tiles side-by-side tiles of mulInto, each rows (1 to 4) x 16, k > 0: row
// i of each tile of C (two vectors of 8) gets r[i]*Σ_p A(i,p)*B[p]
// (+ c[i]*Src[i] with keep), A(i,p) at a + 4*(i*lda + p*astep), row i of
// Src at src + 4*i*lds. Eight accumulators, so two FMA pipes with a latency
// of four stay busy; each p loads 16 floats of a row of B and broadcasts
// four elements of A. Missing rows broadcast row 0 and are not stored.
//
// Registers: DI c, BX ldc bytes, SI a cursor, R8/R9/R12 the byte offsets of
// A's rows 1-3, R10 astep bytes, DX b cursor, R11 ldb bytes, CX k left,
// AX tiles left, R13 the tile's byte offset in c, b and src; Y0-Y7 sums
// (row i in Y(2i), Y(2i+1)), Y8/Y9 the row of B, Y10-Y13 broadcasts.
TEXT ·mulPanelAVX2(SB), NOSPLIT, $0-120
	MOVQ ldc+8(FP), BX
	SHLQ $2, BX
	MOVQ astep+48(FP), R10
	SHLQ $2, R10
	MOVQ ldb+64(FP), R11
	SHLQ $2, R11
	MOVQ tiles+88(FP), AX
	XORQ R13, R13

	MOVQ lda+40(FP), DX
	SHLQ $2, DX
	XORQ R8, R8
	XORQ R9, R9
	XORQ R12, R12
	MOVQ rows+80(FP), CX
	CMPQ CX, $2
	JLT  tile
	MOVQ DX, R8
	CMPQ CX, $3
	JLT  tile
	LEAQ (DX)(DX*1), R9
	CMPQ CX, $4
	JLT  tile
	LEAQ (DX)(DX*2), R12

tile:
	MOVQ   c+0(FP), DI
	ADDQ   R13, DI
	MOVQ   b+56(FP), DX
	ADDQ   R13, DX
	MOVQ   a+32(FP), SI
	MOVQ   k+72(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

loop:
	VMOVUPS      (DX), Y8
	VMOVUPS      32(DX), Y9
	VBROADCASTSS (SI), Y10
	VBROADCASTSS (SI)(R8*1), Y11
	VBROADCASTSS (SI)(R9*1), Y12
	VBROADCASTSS (SI)(R12*1), Y13
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VFMADD231PS  Y8, Y12, Y4
	VFMADD231PS  Y9, Y12, Y5
	VFMADD231PS  Y8, Y13, Y6
	VFMADD231PS  Y9, Y13, Y7
	ADDQ         R10, SI
	ADDQ         R11, DX
	DECQ         CX
	JNZ          loop

	// Scale by r[i]; with keep, add c[i]*Src[i] for the rows there are.
	MOVQ         rs+112(FP), CX
	VBROADCASTSS (CX), Y10
	VBROADCASTSS 4(CX), Y11
	VBROADCASTSS 8(CX), Y12
	VBROADCASTSS 12(CX), Y13
	VMULPS       Y10, Y0, Y0
	VMULPS       Y10, Y1, Y1
	VMULPS       Y11, Y2, Y2
	VMULPS       Y11, Y3, Y3
	VMULPS       Y12, Y4, Y4
	VMULPS       Y12, Y5, Y5
	VMULPS       Y13, Y6, Y6
	VMULPS       Y13, Y7, Y7
	MOVBLZX      keep+96(FP), CX
	TESTQ        CX, CX
	JZ           store
	MOVQ         cs+104(FP), CX
	VBROADCASTSS (CX), Y10
	VBROADCASTSS 4(CX), Y11
	VBROADCASTSS 8(CX), Y12
	VBROADCASTSS 12(CX), Y13
	MOVQ         src+16(FP), SI
	ADDQ         R13, SI
	MOVQ         lds+24(FP), DX
	SHLQ         $2, DX
	VFMADD231PS  (SI), Y10, Y0
	VFMADD231PS  32(SI), Y10, Y1
	CMPQ         rows+80(FP), $1
	JEQ          store
	ADDQ         DX, SI
	VFMADD231PS  (SI), Y11, Y2
	VFMADD231PS  32(SI), Y11, Y3
	CMPQ         rows+80(FP), $2
	JEQ          store
	ADDQ         DX, SI
	VFMADD231PS  (SI), Y12, Y4
	VFMADD231PS  32(SI), Y12, Y5
	CMPQ         rows+80(FP), $3
	JEQ          store
	ADDQ         DX, SI
	VFMADD231PS  (SI), Y13, Y6
	VFMADD231PS  32(SI), Y13, Y7

store:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	CMPQ    rows+80(FP), $1
	JEQ     next
	ADDQ    BX, DI
	VMOVUPS Y2, (DI)
	VMOVUPS Y3, 32(DI)
	CMPQ    rows+80(FP), $2
	JEQ     next
	ADDQ    BX, DI
	VMOVUPS Y4, (DI)
	VMOVUPS Y5, 32(DI)
	CMPQ    rows+80(FP), $3
	JEQ     next
	ADDQ    BX, DI
	VMOVUPS Y6, (DI)
	VMOVUPS Y7, 32(DI)

next:
	ADDQ $64, R13
	DECQ AX
	JNZ  tile
	VZEROUPPER
	RET

// func transpose8AVX2(dst, src *float32, ldd, lds, blocks int)
//
// blocks 8x8 blocks down a column of blocks: block b takes rows 8b..8b+7,
// columns 0..7 of src (lds floats a row) to rows 0..7, columns 8b..8b+7
// of dst (ldd floats a row). Unpack pairs, shuffle quads, swap halves.
TEXT ·transpose8AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ldd+16(FP), BX
	SHLQ $2, BX
	MOVQ lds+24(FP), DX
	SHLQ $2, DX
	MOVQ blocks+32(FP), CX
	LEAQ (DX)(DX*2), R8
	LEAQ (BX)(BX*2), R9

block:
	MOVQ    SI, AX
	VMOVUPS (AX), Y0
	VMOVUPS (AX)(DX*1), Y1
	VMOVUPS (AX)(DX*2), Y2
	VMOVUPS (AX)(R8*1), Y3
	LEAQ    (AX)(DX*4), AX
	VMOVUPS (AX), Y4
	VMOVUPS (AX)(DX*1), Y5
	VMOVUPS (AX)(DX*2), Y6
	VMOVUPS (AX)(R8*1), Y7

	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15

	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7

	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15

	MOVQ    DI, AX
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, (AX)(BX*1)
	VMOVUPS Y10, (AX)(BX*2)
	VMOVUPS Y11, (AX)(R9*1)
	LEAQ    (AX)(BX*4), AX
	VMOVUPS Y12, (AX)
	VMOVUPS Y13, (AX)(BX*1)
	VMOVUPS Y14, (AX)(BX*2)
	VMOVUPS Y15, (AX)(R9*1)

	LEAQ (SI)(DX*8), SI
	ADDQ $32, DI
	DECQ CX
	JNZ  block
	VZEROUPPER
	RET
