//go:build !purego

#include "textflag.h"

// func mulTileAVX2(c *float32, ldc int, a *float32, lda, astep int, b *float32, ldb, k int, keep bool, cs, rs *[4]float32)
//
// One 4x16 tile of mulInto, k > 0: row i of C (two vectors of 8) gets
// c[i]*C[i] + r[i]*Σ_p A(i,p)*B[p], A(i,p) at a + 4*(i*lda + p*astep).
// Eight accumulators, so two FMA pipes with a latency of four stay busy;
// each p loads one 16-float row of B and broadcasts four elements of A.
//
// Registers: DI c, BX ldc bytes, SI a cursor, R8 lda bytes, R9 3*lda bytes,
// R10 astep bytes, DX b cursor, R11 ldb bytes, CX k left, Y0-Y7 sums
// (row i in Y(2i), Y(2i+1)), Y8/Y9 the row of B, Y10-Y13 broadcasts.
TEXT ·mulTileAVX2(SB), NOSPLIT, $0-88
	MOVQ c+0(FP), DI
	MOVQ ldc+8(FP), BX
	SHLQ $2, BX
	MOVQ a+16(FP), SI
	MOVQ lda+24(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R9
	MOVQ astep+32(FP), R10
	SHLQ $2, R10
	MOVQ b+40(FP), DX
	MOVQ ldb+48(FP), R11
	SHLQ $2, R11
	MOVQ k+56(FP), CX

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
	VBROADCASTSS (SI)(R8*2), Y12
	VBROADCASTSS (SI)(R9*1), Y13
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

	// Scale by r[i]; with keep, add c[i]*C[i].
	MOVQ         rs+80(FP), AX
	VBROADCASTSS (AX), Y10
	VBROADCASTSS 4(AX), Y11
	VBROADCASTSS 8(AX), Y12
	VBROADCASTSS 12(AX), Y13
	VMULPS       Y10, Y0, Y0
	VMULPS       Y10, Y1, Y1
	VMULPS       Y11, Y2, Y2
	VMULPS       Y11, Y3, Y3
	VMULPS       Y12, Y4, Y4
	VMULPS       Y12, Y5, Y5
	VMULPS       Y13, Y6, Y6
	VMULPS       Y13, Y7, Y7
	MOVBLZX      keep+64(FP), CX
	TESTQ        CX, CX
	JZ           store
	MOVQ         cs+72(FP), AX
	VBROADCASTSS (AX), Y10
	VBROADCASTSS 4(AX), Y11
	VBROADCASTSS 8(AX), Y12
	VBROADCASTSS 12(AX), Y13
	LEAQ         (BX)(BX*2), R9
	VFMADD231PS  (DI), Y10, Y0
	VFMADD231PS  32(DI), Y10, Y1
	VFMADD231PS  (DI)(BX*1), Y11, Y2
	VFMADD231PS  32(DI)(BX*1), Y11, Y3
	VFMADD231PS  (DI)(BX*2), Y12, Y4
	VFMADD231PS  32(DI)(BX*2), Y12, Y5
	VFMADD231PS  (DI)(R9*1), Y13, Y6
	VFMADD231PS  32(DI)(R9*1), Y13, Y7

store:
	LEAQ    (BX)(BX*2), R9
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, (DI)(BX*1)
	VMOVUPS Y3, 32(DI)(BX*1)
	VMOVUPS Y4, (DI)(BX*2)
	VMOVUPS Y5, 32(DI)(BX*2)
	VMOVUPS Y6, (DI)(R9*1)
	VMOVUPS Y7, 32(DI)(R9*1)
	VZEROUPPER
	RET
