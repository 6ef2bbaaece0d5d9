//go:build !purego

// AVX2 + FMA versions of the Go twins in exp.go, all built on EXP8.
//
// EXP8 takes exp of 8 floats in float64: x = k·ln2 + r with k an integer
// and |r| <= ln2/2 (ln2 split in two so k·ln2 loses nothing), exp(r) by its
// Taylor series to r^11 (truncation below 2^-47 relative), times 2^k added
// into the exponent bits; then one rounding to float32, which also makes
// subnormal and overflowing results right. Inputs are clamped to
// [-150, 130] first, where exp already rounds to 0 and +Inf in float32, so
// 2^k stays a normal float64; the clamps keep NaN.
//
// The last n%8 elements are loaded and stored under a mask, so every
// function handles any n > 0 in the same vector code.

#include "textflag.h"

#define DUP4(name, bits) DATA name+0(SB)/8, bits; DATA name+8(SB)/8, bits; DATA name+16(SB)/8, bits; DATA name+24(SB)/8, bits; GLOBL name(SB), RODATA|NOPTR, $32

DUP4(expLog2e<>, $0x3FF71547652B82FE)
DUP4(expMagic<>, $0x4338000000000000) // 1.5·2^52: adding it rounds to an integer
DUP4(expLn2Hi<>, $0x3FE62E42FEE00000)
DUP4(expLn2Lo<>, $0x3DEA39EF35793C76)
DUP4(expC11<>, $0x3E5AE64567F544E4) // 1/11!
DUP4(expC10<>, $0x3E927E4FB7789F5C)
DUP4(expC9<>, $0x3EC71DE3A556C734)
DUP4(expC8<>, $0x3EFA01A01A01A01A)
DUP4(expC7<>, $0x3F2A01A01A01A01A)
DUP4(expC6<>, $0x3F56C16C16C16C17)
DUP4(expC5<>, $0x3F81111111111111)
DUP4(expC4<>, $0x3FA5555555555555)
DUP4(expC3<>, $0x3FC5555555555555)
DUP4(expC2<>, $0x3FE0000000000000)
DUP4(expOne<>, $0x3FF0000000000000)

DATA expLo<>+0(SB)/4, $0xC3160000   // -150.0
GLOBL expLo<>(SB), RODATA|NOPTR, $4
DATA expHi<>+0(SB)/4, $0x43020000   // 130.0
GLOBL expHi<>(SB), RODATA|NOPTR, $4
DATA expOneF<>+0(SB)/4, $0x3F800000 // 1.0
GLOBL expOneF<>(SB), RODATA|NOPTR, $4
DATA expSign<>+0(SB)/4, $0x80000000
GLOBL expSign<>(SB), RODATA|NOPTR, $4

// EXPSETUP loads the clamp bounds EXP8 keeps in Y14 and Y15.
#define EXPSETUP \
	VBROADCASTSS expLo<>(SB), Y14 \
	VBROADCASTSS expHi<>(SB), Y15

// EXPPD sets p to exp of the 4 doubles in x; x and t are clobbered. t gets
// magic + k, p first k; x becomes r, then p = exp(r) and 2^k is added into
// its exponent field.
#define EXPPD(x, t, p) \
	VMOVUPD      expMagic<>(SB), t    \
	VFMADD231PD  expLog2e<>(SB), x, t \
	VSUBPD       expMagic<>(SB), t, p \
	VFNMADD231PD expLn2Hi<>(SB), p, x \
	VFNMADD231PD expLn2Lo<>(SB), p, x \
	VMOVUPD      expC11<>(SB), p      \
	VFMADD213PD  expC10<>(SB), x, p   \
	VFMADD213PD  expC9<>(SB), x, p    \
	VFMADD213PD  expC8<>(SB), x, p    \
	VFMADD213PD  expC7<>(SB), x, p    \
	VFMADD213PD  expC6<>(SB), x, p    \
	VFMADD213PD  expC5<>(SB), x, p    \
	VFMADD213PD  expC4<>(SB), x, p    \
	VFMADD213PD  expC3<>(SB), x, p    \
	VFMADD213PD  expC2<>(SB), x, p    \
	VFMADD213PD  expOne<>(SB), x, p   \
	VFMADD213PD  expOne<>(SB), x, p   \
	VPSLLQ       $52, t, t            \
	VPADDQ       t, p, p

// EXP8 sets Y0 to exp of the 8 floats in Y0, using Y8-Y13. The clamps
// keep a NaN because it is the second operand.
#define EXP8 \
	VMAXPS       Y0, Y14, Y0  \
	VMINPS       Y0, Y15, Y0  \
	VEXTRACTF128 $1, Y0, X9   \
	VCVTPS2PD    X0, Y8       \
	VCVTPS2PD    X9, Y9       \
	EXPPD(Y8, Y10, Y12)       \
	EXPPD(Y9, Y11, Y13)       \
	VCVTPD2PSY   Y12, X0      \
	VCVTPD2PSY   Y13, X13     \
	VINSERTF128  $1, X13, Y0, Y0

// TAILMASK sets y to the mask of the first n (1..7) lanes (tailMask in
// vec_amd64.go); AX and R11 are clobbered.
#define TAILMASK(n, y) \
	MOVQ    $8, AX             \
	SUBQ    n, AX              \
	LEAQ    ·tailMask(SB), R11 \
	VMOVUPS (R11)(AX*4), y

// func expShiftSumAVX2(x *float32, n int, m float32) float32
TEXT ·expShiftSumAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y1
	VXORPS       Y2, Y2, Y2
	EXPSETUP
	MOVQ         CX, BX
	SHRQ         $3, BX
	JZ           esstail

esloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y1, Y0, Y0
	EXP8
	VMOVUPS Y0, (SI)
	VADDPS  Y0, Y2, Y2
	ADDQ    $32, SI
	DECQ    BX
	JNZ     esloop

esstail:
	ANDQ       $7, CX
	JZ         essum
	TAILMASK(CX, Y3)
	VMASKMOVPS (SI), Y3, Y0
	VSUBPS     Y1, Y0, Y0
	EXP8
	VMASKMOVPS Y0, Y3, (SI)
	VANDPS     Y3, Y0, Y0   // the unused lanes hold exp(-m)
	VADDPS     Y0, Y2, Y2

essum:
	VEXTRACTF128 $1, Y2, X3
	VADDPS       X3, X2, X2
	VHADDPS      X2, X2, X2
	VHADDPS      X2, X2, X2
	VZEROUPPER
	MOVSS        X2, ret+24(FP)
	RET

// SILU sets Y0 to silu of the 8 floats in Y3, Y1 holding 1s and Y2 the
// sign bit.
#define SILU \
	VXORPS Y2, Y3, Y0 \
	EXP8              \
	VADDPS Y1, Y0, Y0 \
	VDIVPS Y0, Y3, Y0

// func siluRowAVX2(x *float32, n int)
TEXT ·siluRowAVX2(SB), NOSPLIT, $0-16
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS expOneF<>(SB), Y1
	VBROADCASTSS expSign<>(SB), Y2
	EXPSETUP
	MOVQ         CX, BX
	SHRQ         $3, BX
	JZ           srtail

srloop:
	VMOVUPS (SI), Y3
	SILU
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	DECQ    BX
	JNZ     srloop

srtail:
	ANDQ       $7, CX
	JZ         srdone
	TAILMASK(CX, Y4)
	VMASKMOVPS (SI), Y4, Y3
	SILU
	VMASKMOVPS Y0, Y4, (SI)

srdone:
	VZEROUPPER
	RET

// func mulSiluAVX2(y, z *float32, n int)
TEXT ·mulSiluAVX2(SB), NOSPLIT, $0-24
	MOVQ         y+0(FP), DI
	MOVQ         z+8(FP), DX
	MOVQ         n+16(FP), CX
	VBROADCASTSS expOneF<>(SB), Y1
	VBROADCASTSS expSign<>(SB), Y2
	EXPSETUP
	MOVQ         CX, BX
	SHRQ         $3, BX
	JZ           mstail

msloop:
	VMOVUPS (DX), Y3
	SILU
	VMULPS  (DI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    BX
	JNZ     msloop

mstail:
	ANDQ       $7, CX
	JZ         msdone
	TAILMASK(CX, Y4)
	VMASKMOVPS (DX), Y4, Y3
	SILU
	VMASKMOVPS (DI), Y4, Y5
	VMULPS     Y5, Y0, Y0
	VMASKMOVPS Y0, Y4, (DI)

msdone:
	VZEROUPPER
	RET

// GATE sets Y0 to Y4/s · sigmoid(Y3), with s in Y5.
#define GATE \
	VXORPS Y2, Y3, Y0 \
	EXP8              \
	VADDPS Y1, Y0, Y0 \
	VDIVPS Y0, Y1, Y0 \
	VDIVPS Y5, Y4, Y4 \
	VMULPS Y0, Y4, Y0

// func gateRowAVX2(y, z *float32, n int, s float32)
TEXT ·gateRowAVX2(SB), NOSPLIT, $0-28
	MOVQ         y+0(FP), DI
	MOVQ         z+8(FP), DX
	MOVQ         n+16(FP), CX
	VBROADCASTSS s+24(FP), Y5
	VBROADCASTSS expOneF<>(SB), Y1
	VBROADCASTSS expSign<>(SB), Y2
	EXPSETUP
	MOVQ         CX, BX
	SHRQ         $3, BX
	JZ           grtail

grloop:
	VMOVUPS (DX), Y3
	VMOVUPS (DI), Y4
	GATE
	VMOVUPS Y0, (DI)
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    BX
	JNZ     grloop

grtail:
	ANDQ       $7, CX
	JZ         grdone
	TAILMASK(CX, Y6)
	VMASKMOVPS (DX), Y6, Y3
	VMASKMOVPS (DI), Y6, Y4
	GATE
	VMASKMOVPS Y0, Y6, (DI)

grdone:
	VZEROUPPER
	RET
