//go:build !purego

#include "textflag.h"

// func deltaRowsAVX2(s, k, q, v, o *float32, rows, n int, beta, decay, kq float32)
//
// deltaRowsGo in one call: for each row of s (n floats), pass 1 takes
// row·k and row·q, pass 2 writes g*row + d*k while the row is still in L1.
// The last n%8 columns go through the mask in Y15.
//
// Registers: DI row, SI row cursor, DX k, R8 q, R11/R12 their cursors,
// R9 v, R10 o, CX rows left, BX n, R13 n*4, Y14 decay (g), X13 beta, X12 kq.
TEXT ·deltaRowsAVX2(SB), NOSPLIT, $0-68
	MOVQ         s+0(FP), DI
	MOVQ         k+8(FP), DX
	MOVQ         q+16(FP), R8
	MOVQ         v+24(FP), R9
	MOVQ         o+32(FP), R10
	MOVQ         rows+40(FP), CX
	MOVQ         n+48(FP), BX
	VMOVSS       beta+56(FP), X13
	VBROADCASTSS decay+60(FP), Y14
	VMOVSS       kq+64(FP), X12
	MOVQ         BX, R13
	SHLQ         $2, R13
	MOVQ         BX, AX
	ANDQ         $7, AX
	NEGQ         AX
	ADDQ         $8, AX
	LEAQ         ·tailMask(SB), R11
	VMOVUPS      (R11)(AX*4), Y15

row:
	MOVQ   DI, SI
	MOVQ   DX, R11
	MOVQ   R8, R12
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   BX, AX
	SHRQ   $4, AX
	JZ     dots8

dots16:
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VFMADD231PS (R11), Y4, Y0
	VFMADD231PS 32(R11), Y5, Y1
	VFMADD231PS (R12), Y4, Y2
	VFMADD231PS 32(R12), Y5, Y3
	ADDQ        $64, SI
	ADDQ        $64, R11
	ADDQ        $64, R12
	DECQ        AX
	JNZ         dots16

dots8:
	TESTQ       $8, BX
	JZ          dotsTail
	VMOVUPS     (SI), Y4
	VFMADD231PS (R11), Y4, Y0
	VFMADD231PS (R12), Y4, Y2
	ADDQ        $32, SI
	ADDQ        $32, R11
	ADDQ        $32, R12

dotsTail:
	TESTQ       $7, BX
	JZ          reduce
	VMASKMOVPS  (SI), Y15, Y4
	VMASKMOVPS  (R11), Y15, Y5
	VFMADD231PS Y5, Y4, Y1
	VMASKMOVPS  (R12), Y15, Y5
	VFMADD231PS Y5, Y4, Y3

reduce:
	// X0 lane 0 gets row·k, X1 lane 0 row·q.
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VPSHUFD      $1, X0, X1

	// d = beta*(v[r] - g*sk) in X4, o[r] = g*sq + d*kq.
	VMOVSS       (R9), X4
	VMULSS       X14, X0, X0
	VSUBSS       X0, X4, X4
	VMULSS       X13, X4, X4
	VMULSS       X14, X1, X1
	VMULSS       X12, X4, X5
	VADDSS       X5, X1, X1
	VMOVSS       X1, (R10)
	VBROADCASTSS X4, Y6

	MOVQ DI, SI
	MOVQ DX, R11
	MOVQ BX, AX
	SHRQ $4, AX
	JZ   update8

update16:
	VMULPS      (SI), Y14, Y7
	VMULPS      32(SI), Y14, Y8
	VFMADD231PS (R11), Y6, Y7
	VFMADD231PS 32(R11), Y6, Y8
	VMOVUPS     Y7, (SI)
	VMOVUPS     Y8, 32(SI)
	ADDQ        $64, SI
	ADDQ        $64, R11
	DECQ        AX
	JNZ         update16

update8:
	TESTQ       $8, BX
	JZ          updateTail
	VMULPS      (SI), Y14, Y7
	VFMADD231PS (R11), Y6, Y7
	VMOVUPS     Y7, (SI)
	ADDQ        $32, SI
	ADDQ        $32, R11

updateTail:
	TESTQ       $7, BX
	JZ          next
	VMASKMOVPS  (SI), Y15, Y7
	VMULPS      Y14, Y7, Y7
	VMASKMOVPS  (R11), Y15, Y8
	VFMADD231PS Y8, Y6, Y7
	VMASKMOVPS  Y7, Y15, (SI)

next:
	ADDQ R13, DI
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JNZ  row
	VZEROUPPER
	RET
