#!/usr/bin/env python3
"""gemm_ra.py: a model of gemm.cu's register-A wgmma form (gemm_tile with
WG = 3, tiles w64r, w128r and w256r), checked on the CPU before a GPU runs it.

Yᵀ = W·Xᵀ: each warpgroup (warps 4·wg .. 4·wg+3 of the block's 8) takes
64 of the tile's 128 weight rows as wgmma's A operand from registers and
the tile's 64, 128 or 256 X rows as B (wgmma's n). Transcribed from the kernel:

1. The codes as the copies stage them (the W rows of a block in
   gemm_tile's order: dense and down n0 + row; gate/up 8 gate rows, then
   the 8 up rows of the same outputs), a row's k-tile 8 words, element j
   of a word in nibble j.
2. Each thread's A fragment per k-step ks: rows wrow = 64·wg + 16·(warp %
   4) + g and wrow + 8, elements 2c, 2c+1 of words 2ks (f0, f1) and 2ks+1
   (f2, f3), through dequant_pair2's bit operations (t = w >> 8c; lo =
   t & 0xF, hi = (t << 12) & 0xF0000).
3. wgmma m64n128k16 with A from registers as CUTLASS's RS layout has it
   (thread (warp, g, c): a0 row g cols 2c, 2c+1; a1 row g+8; a2 row g cols
   2c+8, 2c+9; a3 row g+8), B[n][k] the X tile's row n, and the
   accumulators d[4j + i] at row 16·warp + g + 8·(i >= 2), column 8j + 2c
   + (i & 1).
4. The epilogue's stores: dense and down y[r][n0 + wrow (+8)]; gate/up
   h[r][n0 + 32·wg + 8·(warp % 4) + g] = silu(gate)·up from d[4j + e] and
   d[4j + 2 + e].

Every output must be written once and equal its definition, exactly (small
integer weights and inputs; SiLU applied to exact sums). Run: python3
docs/bench/cuda/models/gemm_ra.py (pure Python 3)."""
import math
import random

random.seed(7)
BN, K = 128, 128  # two k-tiles; BM, the X rows (wgmma's n): 16 to 256
KT = K // 64


def codes_and_weights(rows):
    q = [[random.randrange(16) for _ in range(K)] for _ in range(rows)]
    s = [[random.choice([1, 2, 3]) for _ in range(KT)] for _ in range(rows)]
    b = [[random.choice([-8, -3, 0, 5]) for _ in range(KT)] for _ in range(rows)]
    w = [[s[r][k // 64] * q[r][k] + b[r][k // 64] for k in range(K)] for r in range(rows)]
    return q, s, b, w


def word(q_row, kt, wi):
    """The code word wi of a row's k-tile kt: element j in nibble j."""
    v = 0
    for j in range(8):
        v |= q_row[64 * kt + 8 * wi + j] << (4 * j)
    return v


def pair2(w, c, s, b):
    """dequant_pair2: the weights of elements 2c, 2c+1 of word w."""
    t = w >> (8 * c)
    x = (t & 0xF) | ((t << 12) & 0xF0000) | 0x43004300
    lo, hi = x & 0xFFFF, x >> 16
    # bf16 0x4300 | q is 128 + q; the two fma: (128+q)·1 - 128, then ·s + b
    return ((lo - 0x4300) * s + b, (hi - 0x4300) * s + b)


def run(mode, BM):
    N = 200 if mode != "gateup" else 100  # N off the tile: the last block's rows past N
    X = [[random.randrange(-4, 5) for _ in range(K)] for _ in range(BM)]
    mats, full = {}, {}
    for kind in (("gate", "up") if mode == "gateup" else ("w",)):
        q, s, b, w = codes_and_weights(N)
        mats[kind], full[kind] = (q, s, b), w
    out = {}
    nblocks = (N + (BN // 2 if mode == "gateup" else BN) - 1) // (BN // 2 if mode == "gateup" else BN)
    for bx in range(nblocks):
        n0 = bx * (BN // 2) if mode == "gateup" else bx * BN
        # the staged codes and scale/bias of the block's 128 W rows (gemm_tile's csrc/ssrc mapping)
        rowsrc = []
        for row in range(BN):
            if mode == "gateup":
                t = row >> 3
                n = n0 + (t >> 1) * 8 + (row & 7)
                rowsrc.append(("up" if t & 1 else "gate", n))
            else:
                rowsrc.append(("w", n0 + row))

        def src(row):
            kind, n = rowsrc[row]
            if n >= N:
                return None  # cp.async with valid = false: zeros
            return mats[kind], n

        d = {}  # (warp, lane) -> 64 accumulators
        for warp in range(8):
            for lane in range(32):
                d[(warp, lane)] = [0] * (BM // 2)
        for kt in range(KT):
            for ks in range(4):
                # each warpgroup's A (64 x 16) from its threads' fragments
                for wgi in range(2):
                    A = [[None] * 16 for _ in range(64)]
                    for wl in range(4):
                        warp = 4 * wgi + wl
                        for lane in range(32):
                            g, c = lane >> 2, lane & 3
                            wrow = 64 * (warp >> 2) + 16 * (warp & 3) + g
                            f = []
                            for rr, wi in ((wrow, 2 * ks), (wrow + 8, 2 * ks), (wrow, 2 * ks + 1), (wrow + 8, 2 * ks + 1)):
                                sr = src(rr)
                                if sr is None:
                                    f.append((0, 0))  # zero codes and scale/bias words: weight 0
                                    continue
                                (q, s, b), n = sr
                                f.append(pair2(word(q[n], kt, wi), c, s[n][kt], b[n][kt]))
                            # RS layout: a0 (g, 2c..), a1 (g+8, 2c..), a2 (g, 2c+8..), a3 (g+8, 2c+8..)
                            m = 16 * wl
                            A[m + g][2 * c], A[m + g][2 * c + 1] = f[0]
                            A[m + g + 8][2 * c], A[m + g + 8][2 * c + 1] = f[1]
                            A[m + g][2 * c + 8], A[m + g][2 * c + 9] = f[2]
                            A[m + g + 8][2 * c + 8], A[m + g + 8][2 * c + 9] = f[3]
                    assert all(v is not None for row in A for v in row), "a fragment element not written"
                    for wl in range(4):
                        warp = 4 * wgi + wl
                        for lane in range(32):
                            g, c = lane >> 2, lane & 3
                            acc = d[(warp, lane)]
                            for j in range(BM // 8):
                                for i in range(4):
                                    m = 16 * wl + g + 8 * (i >> 1)
                                    n = 8 * j + 2 * c + (i & 1)
                                    acc[4 * j + i] += sum(A[m][k] * X[n][64 * kt + 16 * ks + k] for k in range(16))
        # the epilogue
        for warp in range(8):
            for lane in range(32):
                g, c = lane >> 2, lane & 3
                acc = d[(warp, lane)]
                wrow = 64 * (warp >> 2) + 16 * (warp & 3) + g
                for j in range(BM // 8):
                    for e in range(2):
                        r = 8 * j + 2 * c + e
                        if mode == "gateup":
                            n = n0 + 32 * (warp >> 2) + 8 * (warp & 3) + g
                            if n < N:
                                gt, up = acc[4 * j + e], acc[4 * j + 2 + e]
                                key = (r, n)
                                assert key not in out, ("written twice", key)
                                out[key] = (gt, up)
                        else:
                            for rr, v in ((wrow, acc[4 * j + e]), (wrow + 8, acc[4 * j + 2 + e])):
                                if n0 + rr < N:
                                    key = (r, n0 + rr)
                                    assert key not in out, ("written twice", key)
                                    out[key] = v
    # against the definition
    for r in range(BM):
        for n in range(N):
            got = out.get((r, n))
            assert got is not None, ("not written", mode, r, n)
            if mode == "gateup":
                want = tuple(sum(X[r][k] * full[kind][n][k] for k in range(K)) for kind in ("gate", "up"))
            else:
                want = sum(X[r][k] * full["w"][n][k] for k in range(K))
            assert got == want, (mode, r, n, got, want)
    return len(out)


for BM in (16, 32, 64, 128, 256):
    for mode in ("dense", "gateup"):
        print(f"{BM} X rows, {mode}: {run(mode, BM)} outputs, each written once and exact")
print("ok")
