//go:build !purego

// AVX2 + FMA kernels behind MatMul: dequantising one weight row, and the
// register tiles that multiply dequantised rows by input rows.
// kernels_amd64.go describes them and names their Go twins.

#include "textflag.h"

// DEQUANT4 expands the 16 codes in the 8 bytes at off(SI) to the floats
// at dst(DI)..dst+63(DI). Byte k holds codes 2k (low nibble) and 2k+1; the
// unpacks interleave them within 128-bit lanes and the permutes put the
// lanes in order. Y11 holds 0xf in every lane, Y12 and Y13 the group's
// scale and bias.
#define DEQUANT4(off, dst) \
	VPMOVZXBD   off(SI), Y4         \
	VPAND       Y11, Y4, Y5         \
	VPSRLD      $4, Y4, Y6          \
	VPUNPCKLDQ  Y6, Y5, Y7          \
	VPUNPCKHDQ  Y6, Y5, Y8          \
	VPERM2I128  $0x20, Y8, Y7, Y9   \
	VPERM2I128  $0x31, Y8, Y7, Y10  \
	VCVTDQ2PS   Y9, Y9              \
	VCVTDQ2PS   Y10, Y10            \
	VFMADD213PS Y13, Y12, Y9        \
	VFMADD213PS Y13, Y12, Y10       \
	VMOVUPS     Y9, dst(DI)         \
	VMOVUPS     Y10, dst+32(DI)

// func dequant4AVX2(words *uint32, scales, biases *uint16, dst *float32, groups, blocks int)
TEXT ·dequant4AVX2(SB), NOSPLIT, $0-48
	MOVQ  words+0(FP), SI
	MOVQ  scales+8(FP), R8
	MOVQ  biases+16(FP), R9
	MOVQ  dst+24(FP), DI
	MOVQ  groups+32(FP), CX
	MOVL  $15, AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	TESTQ CX, CX
	JZ    dqdone4

dqgroup4:
	VPBROADCASTW (R8), Y12
	VPSLLD       $16, Y12, Y12
	VPBROADCASTW (R9), Y13
	VPSLLD       $16, Y13, Y13
	MOVQ         blocks+40(FP), R13

dqblock4:
	DEQUANT4(0, 0)
	DEQUANT4(8, 64)
	DEQUANT4(16, 128)
	DEQUANT4(24, 192)
	ADDQ $32, SI
	ADDQ $256, DI
	DECQ R13
	JNZ  dqblock4

	ADDQ $2, R8
	ADDQ $2, R9
	DECQ CX
	JNZ  dqgroup4

dqdone4:
	VZEROUPPER
	RET

#define DEQUANT8(off, dst) \
	VPMOVZXBD   off(SI), Y4   \
	VCVTDQ2PS   Y4, Y4        \
	VFMADD213PS Y13, Y12, Y4  \
	VMOVUPS     Y4, dst(DI)

// func dequant8AVX2(words *uint32, scales, biases *uint16, dst *float32, groups, blocks int)
TEXT ·dequant8AVX2(SB), NOSPLIT, $0-48
	MOVQ  words+0(FP), SI
	MOVQ  scales+8(FP), R8
	MOVQ  biases+16(FP), R9
	MOVQ  dst+24(FP), DI
	MOVQ  groups+32(FP), CX
	TESTQ CX, CX
	JZ    dqdone8

dqgroup8:
	VPBROADCASTW (R8), Y12
	VPSLLD       $16, Y12, Y12
	VPBROADCASTW (R9), Y13
	VPSLLD       $16, Y13, Y13
	MOVQ         blocks+40(FP), R13

dqblock8:
	DEQUANT8(0, 0)
	DEQUANT8(8, 32)
	DEQUANT8(16, 64)
	DEQUANT8(24, 96)
	DEQUANT8(32, 128)
	DEQUANT8(40, 160)
	DEQUANT8(48, 192)
	DEQUANT8(56, 224)
	ADDQ $64, SI
	ADDQ $256, DI
	DECQ R13
	JNZ  dqblock8

	ADDQ $2, R8
	ADDQ $2, R9
	DECQ CX
	JNZ  dqgroup8

dqdone8:
	VZEROUPPER
	RET

// func tile4x2AVX2(w, x *float32, cols int, out *[8]float32)
//
// Eight accumulators: Y0..Y3 for input row 0 against weight rows 0..3,
// Y4..Y7 for input row 1.
TEXT ·tile4x2AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DX
	MOVQ cols+16(FP), CX
	MOVQ out+24(FP), DI
	LEAQ (SI)(CX*4), R9
	LEAQ (R9)(CX*4), R10
	LEAQ (R10)(CX*4), R11
	LEAQ (DX)(CX*4), R12
	SHRQ $3, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ CX, CX
	JZ    t42reduce

t42loop:
	VMOVUPS     (DX), Y8
	VMOVUPS     (R12), Y9
	VMOVUPS     (SI), Y10
	VMOVUPS     (R9), Y11
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y10, Y9, Y4
	VFMADD231PS Y11, Y8, Y1
	VFMADD231PS Y11, Y9, Y5
	VMOVUPS     (R10), Y10
	VMOVUPS     (R11), Y11
	VFMADD231PS Y10, Y8, Y2
	VFMADD231PS Y10, Y9, Y6
	VFMADD231PS Y11, Y8, Y3
	VFMADD231PS Y11, Y9, Y7
	ADDQ        $32, DX
	ADDQ        $32, R12
	ADDQ        $32, SI
	ADDQ        $32, R9
	ADDQ        $32, R10
	ADDQ        $32, R11
	DECQ        CX
	JNZ         t42loop

t42reduce:
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X12
	VADDPS       X12, X0, X0
	VMOVUPS      X0, (DI)
	VHADDPS      Y7, Y6, Y6
	VHADDPS      Y5, Y4, Y4
	VHADDPS      Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X12
	VADDPS       X12, X4, X4
	VMOVUPS      X4, 16(DI)
	VZEROUPPER
	RET
