//go:build !purego

// MatVec row kernels: AVX2 + FMA for 4- and 8-bit codes, and AVX-512 for
// 4-bit codes in groups of 64. kernels_amd64.go describes the input layout
// and names the Go twin (matVecRowsGo) they are tested against.
//
// Per group, the sums Σ q·x are kept in two vector accumulators, started
// by a multiply so each group's chain is independent of the last; they are
// folded into the row's vector sum Y7 (Z7) times the broadcast scale. After
// the groups, the bias term Σ bias·xsum joins Y7 eight groups at a time and
// X6 takes the last few.
//
// Registers: SI codes, R8/R9 scales/biases of the row, R10 group index,
// R11 groups rounded down to 8, R12 groups, R13 blocks left in a group,
// DX x, BX xsum, DI y, CX rows left.

#include "textflag.h"

// BLOCK4 adds one block of 64 4-bit codes at (SI) times x at (DX) into Y0
// and Y1. Y8..Y14 hold the nibble masks 0xf<<0 ... 0xf<<24: nibble j is only
// masked, not shifted, so it reads as q·16^j and x was scaled by 16^-j to
// match. Nibble 7 is shifted down instead, as the masked value would not fit
// an int32. first is VMULPS for the first block of a group and VFMADD231PS
// after.
#define BLOCK4(first) \
	VMOVDQU     (SI), Y4        \
	VPAND       Y8, Y4, Y5      \
	VCVTDQ2PS   Y5, Y5          \
	first       (DX), Y5, Y0    \
	VPAND       Y9, Y4, Y6      \
	VCVTDQ2PS   Y6, Y6          \
	first       32(DX), Y6, Y1  \
	VPAND       Y10, Y4, Y5     \
	VCVTDQ2PS   Y5, Y5          \
	VFMADD231PS 64(DX), Y5, Y0  \
	VPAND       Y11, Y4, Y6     \
	VCVTDQ2PS   Y6, Y6          \
	VFMADD231PS 96(DX), Y6, Y1  \
	VPAND       Y12, Y4, Y5     \
	VCVTDQ2PS   Y5, Y5          \
	VFMADD231PS 128(DX), Y5, Y0 \
	VPAND       Y13, Y4, Y6     \
	VCVTDQ2PS   Y6, Y6          \
	VFMADD231PS 160(DX), Y6, Y1 \
	VPAND       Y14, Y4, Y5     \
	VCVTDQ2PS   Y5, Y5          \
	VFMADD231PS 192(DX), Y5, Y0 \
	VPSRLD      $28, Y4, Y6     \
	VCVTDQ2PS   Y6, Y6          \
	VFMADD231PS 224(DX), Y6, Y1 \
	ADDQ        $32, SI         \
	ADDQ        $256, DX

// BLOCK8 is BLOCK4 for 64 8-bit codes, widened from bytes in column order.
#define BLOCK8(first) \
	VPMOVZXBD   (SI), Y5        \
	VPMOVZXBD   8(SI), Y6       \
	VCVTDQ2PS   Y5, Y5          \
	VCVTDQ2PS   Y6, Y6          \
	first       (DX), Y5, Y0    \
	first       32(DX), Y6, Y1  \
	VPMOVZXBD   16(SI), Y5      \
	VPMOVZXBD   24(SI), Y6      \
	VCVTDQ2PS   Y5, Y5          \
	VCVTDQ2PS   Y6, Y6          \
	VFMADD231PS 64(DX), Y5, Y0  \
	VFMADD231PS 96(DX), Y6, Y1  \
	VPMOVZXBD   32(SI), Y5      \
	VPMOVZXBD   40(SI), Y6      \
	VCVTDQ2PS   Y5, Y5          \
	VCVTDQ2PS   Y6, Y6          \
	VFMADD231PS 128(DX), Y5, Y0 \
	VFMADD231PS 160(DX), Y6, Y1 \
	VPMOVZXBD   48(SI), Y5      \
	VPMOVZXBD   56(SI), Y6      \
	VCVTDQ2PS   Y5, Y5          \
	VCVTDQ2PS   Y6, Y6          \
	VFMADD231PS 192(DX), Y5, Y0 \
	VFMADD231PS 224(DX), Y6, Y1 \
	ADDQ        $64, SI         \
	ADDQ        $256, DX

// FOLD adds group R10's sums Y0 + Y1, times its scale, into Y7.
#define FOLD \
	VADDPS       Y1, Y0, Y0      \
	VPBROADCASTW (R8)(R10*2), Y5 \
	VPSLLD       $16, Y5, Y5     \
	VFMADD231PS  Y5, Y0, Y7

// SETUP loads the arguments every kernel shares.
#define SETUP \
	MOVQ words+0(FP), SI    \
	MOVQ scales+8(FP), R8   \
	MOVQ biases+16(FP), R9  \
	MOVQ xsum+32(FP), BX    \
	MOVQ y+40(FP), DI       \
	MOVQ rows+48(FP), CX    \
	MOVQ groups+56(FP), R12 \
	MOVQ R12, R11           \
	ANDQ $-8, R11

// FINISH adds the bias term to Y7, stores the row's sum and moves on to
// the next row's scales and biases.
#define FINISH \
	XORQ        R10, R10            \
	VXORPS      X6, X6, X6          \
	CMPQ        R10, R11            \
	JEQ         tail                \
bias8:                              \
	VPMOVZXWD   (R9)(R10*2), Y5     \
	VPSLLD      $16, Y5, Y5         \
	VFMADD231PS (BX)(R10*4), Y5, Y7 \
	ADDQ        $8, R10             \
	CMPQ        R10, R11            \
	JNE         bias8               \
tail:                               \
	CMPQ        R10, R12            \
	JEQ         sum                 \
	MOVWLZX     (R9)(R10*2), AX     \
	SHLL        $16, AX             \
	VMOVD       AX, X5              \
	VFMADD231SS (BX)(R10*4), X5, X6 \
	INCQ        R10                 \
	JMP         tail                \
sum:                                \
	VEXTRACTF128 $1, Y7, X0         \
	VADDPS       X7, X0, X0         \
	VPSHUFD      $0x4e, X0, X1      \
	VADDPS       X1, X0, X0         \
	VPSHUFD      $0xb1, X0, X1      \
	VADDSS       X1, X0, X0         \
	VADDSS       X6, X0, X0         \
	VMOVSS       X0, (DI)           \
	ADDQ         $4, DI             \
	LEAQ         (R8)(R12*2), R8    \
	LEAQ         (R9)(R12*2), R9

// MATVEC is the whole AVX2 kernel around a block macro.
#define MATVEC(block) \
	SETUP                   \
	TESTQ CX, CX            \
	JZ    done              \
row:                        \
	MOVQ   x+24(FP), DX     \
	XORQ   R10, R10         \
	VXORPS Y7, Y7, Y7       \
group:                      \
	MOVQ blocks+64(FP), R13 \
	block(VMULPS)           \
	DECQ R13                \
	JZ   fold               \
more:                       \
	block(VFMADD231PS)      \
	DECQ R13                \
	JNZ  more               \
fold:                       \
	FOLD                    \
	INCQ R10                \
	CMPQ R10, R12           \
	JNE  group              \
	FINISH                  \
	DECQ CX                 \
	JNZ  row                \
done:                       \
	VZEROUPPER              \
	RET


// func matVec4AVX2(words *uint32, scales, biases *uint16, x, xsum, y *float32, rows, groups, blocks int)
TEXT ·matVec4AVX2(SB), NOSPLIT, $0-72
	MOVL         $15, AX
	VMOVD        AX, X8
	VPBROADCASTD X8, Y8
	VPSLLD       $4, Y8, Y9
	VPSLLD       $8, Y8, Y10
	VPSLLD       $12, Y8, Y11
	VPSLLD       $16, Y8, Y12
	VPSLLD       $20, Y8, Y13
	VPSLLD       $24, Y8, Y14
	MATVEC(BLOCK4)

// func matVec8AVX2(words *uint32, scales, biases *uint16, x, xsum, y *float32, rows, groups, blocks int)
TEXT ·matVec8AVX2(SB), NOSPLIT, $0-72
	MATVEC(BLOCK8)

// func matVec4AVX512(words *uint32, scales, biases *uint16, x, xsum, y *float32, rows, groups int)
//
// Two groups of 64 per step: lanes 0..7 hold the 8 words of group g, lanes
// 8..15 those of group g+1. Their scales, adjacent in memory, are read as
// one dword s_g | s_g+1<<16 into every lane; shifting the low 8 lanes left
// by 16 (Z16) and masking with 0xffff0000 (Z17) leaves each lane its own
// scale's float bits. An odd last group goes through BLOCK4 after Z7 has
// been folded to Y7 (a VEX write to Y7 would clear Z7's upper half).
TEXT ·matVec4AVX512(SB), NOSPLIT, $0-64
	MOVL         $15, AX
	VPBROADCASTD AX, Z8
	VPSLLD       $4, Z8, Z9
	VPSLLD       $8, Z8, Z10
	VPSLLD       $12, Z8, Z11
	VPSLLD       $16, Z8, Z12
	VPSLLD       $20, Z8, Z13
	VPSLLD       $24, Z8, Z14
	MOVL         $16, AX
	VPBROADCASTD AX, Y16
	MOVL         $0xffff0000, AX
	VPBROADCASTD AX, Z17
	SETUP
	MOVQ         R12, R13
	ANDQ         $-2, R13
	TESTQ        CX, CX
	JZ           done

row:
	MOVQ   x+24(FP), DX
	XORQ   R10, R10
	VPXORD Z7, Z7, Z7
	CMPQ   R10, R13
	JEQ    pairsdone

pair:
	VMOVDQU32    (SI), Z4
	VPANDD       Z8, Z4, Z5
	VCVTDQ2PS    Z5, Z5
	VMULPS       (DX), Z5, Z0
	VPANDD       Z9, Z4, Z6
	VCVTDQ2PS    Z6, Z6
	VMULPS       64(DX), Z6, Z1
	VPANDD       Z10, Z4, Z5
	VCVTDQ2PS    Z5, Z5
	VFMADD231PS  128(DX), Z5, Z0
	VPANDD       Z11, Z4, Z6
	VCVTDQ2PS    Z6, Z6
	VFMADD231PS  192(DX), Z6, Z1
	VPANDD       Z12, Z4, Z5
	VCVTDQ2PS    Z5, Z5
	VFMADD231PS  256(DX), Z5, Z0
	VPANDD       Z13, Z4, Z6
	VCVTDQ2PS    Z6, Z6
	VFMADD231PS  320(DX), Z6, Z1
	VPANDD       Z14, Z4, Z5
	VCVTDQ2PS    Z5, Z5
	VFMADD231PS  384(DX), Z5, Z0
	VPSRLD       $28, Z4, Z6
	VCVTDQ2PS    Z6, Z6
	VFMADD231PS  448(DX), Z6, Z1
	ADDQ         $64, SI
	ADDQ         $512, DX
	VADDPS       Z1, Z0, Z0
	VPBROADCASTD (R8)(R10*2), Z5
	VPSLLVD      Z16, Z5, Z5
	VPANDD       Z17, Z5, Z5
	VFMADD231PS  Z5, Z0, Z7
	ADDQ         $2, R10
	CMPQ         R10, R13
	JNE          pair

pairsdone:
	VEXTRACTF64X4 $1, Z7, Y5
	VADDPS        Y5, Y7, Y7
	CMPQ          R10, R12
	JEQ           finish
	BLOCK4(VMULPS)
	FOLD

finish:
	FINISH
	DECQ CX
	JNZ  row

done:
	VZEROUPPER
	RET
