//go:build !purego

// AVX2 + FMA versions of the Go twins in vec.go. Each takes n > 0: whole
// vectors of 8 floats first (several accumulators, so the FMA chains
// overlap), then the last n%8 elements one at a time. A scalar VEX op
// zeroes the upper half of its register, so the sums are reduced to lane 0
// before the scalar tail adds to them.

#include "textflag.h"

// func dotAVX2(a, b *float32, n int) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DX
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   CX, BX
	SHRQ   $5, BX
	JZ     dot8

dot32:
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DX), Y4, Y0
	VFMADD231PS 32(DX), Y5, Y1
	VFMADD231PS 64(DX), Y6, Y2
	VFMADD231PS 96(DX), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DX
	DECQ        BX
	JNZ         dot32

dot8:
	MOVQ CX, BX
	ANDQ $31, BX
	SHRQ $3, BX
	JZ   dotreduce

dot8loop:
	VMOVUPS     (SI), Y4
	VFMADD231PS (DX), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DX
	DECQ        BX
	JNZ         dot8loop

dotreduce:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	ANDQ         $7, CX
	JZ           dotdone

dottail:
	VMOVSS      (SI), X4
	VFMADD231SS (DX), X4, X0
	ADDQ        $4, SI
	ADDQ        $4, DX
	DECQ        CX
	JNZ         dottail

dotdone:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func axpyAVX2(a float32, x, y *float32, n int)
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	VBROADCASTSS a+0(FP), Y0
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n+24(FP), CX
	MOVQ         CX, BX
	SHRQ         $5, BX
	JZ           axpy8

axpy32:
	VMOVUPS     (DI), Y1
	VMOVUPS     32(DI), Y2
	VMOVUPS     64(DI), Y3
	VMOVUPS     96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS     Y1, (DI)
	VMOVUPS     Y2, 32(DI)
	VMOVUPS     Y3, 64(DI)
	VMOVUPS     Y4, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	DECQ        BX
	JNZ         axpy32

axpy8:
	MOVQ CX, BX
	ANDQ $31, BX
	SHRQ $3, BX
	JZ   axpytail

axpy8loop:
	VMOVUPS     (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS     Y1, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	DECQ        BX
	JNZ         axpy8loop

axpytail:
	ANDQ $7, CX
	JZ   axpydone

axpy1:
	VMOVSS      (DI), X1
	VFMADD231SS (SI), X0, X1
	VMOVSS      X1, (DI)
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         axpy1

axpydone:
	VZEROUPPER
	RET

// func dot4AVX2(rows *float32, stride int, x *float32, n int, out *[4]float32)
//
// Rows 0-3 at SI, R9, R10, R11 accumulate in Y0-Y3 and Y4-Y7.
TEXT ·dot4AVX2(SB), NOSPLIT, $0-40
	MOVQ   rows+0(FP), SI
	MOVQ   stride+8(FP), AX
	MOVQ   x+16(FP), DX
	MOVQ   n+24(FP), CX
	MOVQ   out+32(FP), DI
	LEAQ   (SI)(AX*4), R9
	LEAQ   (R9)(AX*4), R10
	LEAQ   (R10)(AX*4), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   CX, BX
	SHRQ   $4, BX
	JZ     dot4x8

dot4x16:
	VMOVUPS     (DX), Y8
	VMOVUPS     32(DX), Y9
	VFMADD231PS (SI), Y8, Y0
	VFMADD231PS 32(SI), Y9, Y4
	VFMADD231PS (R9), Y8, Y1
	VFMADD231PS 32(R9), Y9, Y5
	VFMADD231PS (R10), Y8, Y2
	VFMADD231PS 32(R10), Y9, Y6
	VFMADD231PS (R11), Y8, Y3
	VFMADD231PS 32(R11), Y9, Y7
	ADDQ        $64, DX
	ADDQ        $64, SI
	ADDQ        $64, R9
	ADDQ        $64, R10
	ADDQ        $64, R11
	DECQ        BX
	JNZ         dot4x16

dot4x8:
	TESTQ       $8, CX
	JZ          dot4reduce
	VMOVUPS     (DX), Y8
	VFMADD231PS (SI), Y8, Y0
	VFMADD231PS (R9), Y8, Y1
	VFMADD231PS (R10), Y8, Y2
	VFMADD231PS (R11), Y8, Y3
	ADDQ        $32, DX
	ADDQ        $32, SI
	ADDQ        $32, R9
	ADDQ        $32, R10
	ADDQ        $32, R11

dot4reduce:
	// X0 gets the four sums, row 0 in lane 0.
	VADDPS       Y4, Y0, Y0
	VADDPS       Y5, Y1, Y1
	VADDPS       Y6, Y2, Y2
	VADDPS       Y7, Y3, Y3
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X12
	VADDPS       X12, X0, X0
	ANDQ         $7, CX
	JZ           dot4done

	// The tail sums of rows 0-3 go to X4-X7, then into the lanes of X0.
	VXORPS X4, X4, X4
	VXORPS X5, X5, X5
	VXORPS X6, X6, X6
	VXORPS X7, X7, X7

dot4tail:
	VMOVSS      (DX), X8
	VFMADD231SS (SI), X8, X4
	VFMADD231SS (R9), X8, X5
	VFMADD231SS (R10), X8, X6
	VFMADD231SS (R11), X8, X7
	ADDQ        $4, DX
	ADDQ        $4, SI
	ADDQ        $4, R9
	ADDQ        $4, R10
	ADDQ        $4, R11
	DECQ        CX
	JNZ         dot4tail
	VUNPCKLPS   X5, X4, X4
	VUNPCKLPS   X7, X6, X6
	VMOVLHPS    X6, X4, X4
	VADDPS      X4, X0, X0

dot4done:
	VMOVUPS X0, (DI)
	VZEROUPPER
	RET

// func axpy4AVX2(a *[4]float32, rows *float32, stride int, y *float32, n int)
//
// a[0..3] broadcast in Y0-Y3; rows 0-3 at SI, R9, R10, R11.
TEXT ·axpy4AVX2(SB), NOSPLIT, $0-40
	MOVQ         a+0(FP), AX
	VBROADCASTSS (AX), Y0
	VBROADCASTSS 4(AX), Y1
	VBROADCASTSS 8(AX), Y2
	VBROADCASTSS 12(AX), Y3
	MOVQ         rows+8(FP), SI
	MOVQ         stride+16(FP), AX
	MOVQ         y+24(FP), DI
	MOVQ         n+32(FP), CX
	LEAQ         (SI)(AX*4), R9
	LEAQ         (R9)(AX*4), R10
	LEAQ         (R10)(AX*4), R11
	MOVQ         CX, BX
	SHRQ         $4, BX
	JZ           axpy4x8

axpy4x16:
	VMOVUPS     (DI), Y4
	VMOVUPS     32(DI), Y5
	VFMADD231PS (SI), Y0, Y4
	VFMADD231PS 32(SI), Y0, Y5
	VFMADD231PS (R9), Y1, Y4
	VFMADD231PS 32(R9), Y1, Y5
	VFMADD231PS (R10), Y2, Y4
	VFMADD231PS 32(R10), Y2, Y5
	VFMADD231PS (R11), Y3, Y4
	VFMADD231PS 32(R11), Y3, Y5
	VMOVUPS     Y4, (DI)
	VMOVUPS     Y5, 32(DI)
	ADDQ        $64, DI
	ADDQ        $64, SI
	ADDQ        $64, R9
	ADDQ        $64, R10
	ADDQ        $64, R11
	DECQ        BX
	JNZ         axpy4x16

axpy4x8:
	TESTQ       $8, CX
	JZ          axpy4tail
	VMOVUPS     (DI), Y4
	VFMADD231PS (SI), Y0, Y4
	VFMADD231PS (R9), Y1, Y4
	VFMADD231PS (R10), Y2, Y4
	VFMADD231PS (R11), Y3, Y4
	VMOVUPS     Y4, (DI)
	ADDQ        $32, DI
	ADDQ        $32, SI
	ADDQ        $32, R9
	ADDQ        $32, R10
	ADDQ        $32, R11

axpy4tail:
	ANDQ $7, CX
	JZ   axpy4done

axpy4one:
	VMOVSS      (DI), X4
	VFMADD231SS (SI), X0, X4
	VFMADD231SS (R9), X1, X4
	VFMADD231SS (R10), X2, X4
	VFMADD231SS (R11), X3, X4
	VMOVSS      X4, (DI)
	ADDQ        $4, DI
	ADDQ        $4, SI
	ADDQ        $4, R9
	ADDQ        $4, R10
	ADDQ        $4, R11
	DECQ        CX
	JNZ         axpy4one

axpy4done:
	VZEROUPPER
	RET

// func maxAVX2(x *float32, n int) float32
//
// VMAXPS returns its second source when either is NaN: the running
// maximum goes there, so NaN elements are passed over as in maxGo.
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         $0xFF800000, AX
	MOVL         AX, X0
	VBROADCASTSS X0, Y0
	VMOVAPS      Y0, Y1
	MOVQ         CX, BX
	SHRQ         $4, BX
	JZ           max8

max16:
	VMOVUPS (SI), Y2
	VMOVUPS 32(SI), Y3
	VMAXPS  Y0, Y2, Y0
	VMAXPS  Y1, Y3, Y1
	ADDQ    $64, SI
	DECQ    BX
	JNZ     max16

max8:
	TESTQ   $8, CX
	JZ      maxreduce
	VMOVUPS (SI), Y2
	VMAXPS  Y0, Y2, Y0
	ADDQ    $32, SI

maxreduce:
	VMAXPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VPSHUFD      $0x4E, X0, X1
	VMAXPS       X1, X0, X0
	VPSHUFD      $0xB1, X0, X1
	VMAXPS       X1, X0, X0
	ANDQ         $7, CX
	JZ           maxdone

max1:
	VMOVSS (SI), X2
	VMAXSS X0, X2, X0
	ADDQ   $4, SI
	DECQ   CX
	JNZ    max1

maxdone:
	VZEROUPPER
	MOVSS X0, ret+16(FP)
	RET
