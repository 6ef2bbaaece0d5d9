#!/usr/bin/env python3
"""qgemm_f64.py: a model of ops.cu's qf_gemm<TM, TN> (the router's float64
logits: qgemm_f64 at 2 x 2, qgemm_f64_w at 4 x 4), checked on the CPU
before a GPU runs it.

The kernel's indexing, transcribed: a block of 128 threads (four warps,
2 x 2) over BM = 16·TM tokens and BN = 16·TN weight rows, each group of 64
columns fetched by the threads (XR token rows a warp, WORDS code words a
thread with their rows' scales and biases), staged into xs and ws, then
sixteen k-steps of m8n8k4 products per warp tile (lane l: A[l>>2][l&3],
B[l&3][l>>2], D[l>>2][2(l&3)+e]), the columns split S ways over the grid's
z, the epilogue writing y (one split) or the partials, which are added in
split order as route_select does. Every output is checked against its
definition with small integer inputs (exact), for 4- and 8-bit codes, rows
and tokens off the tiles, and splits even and uneven.

Run: python3 docs/bench/cuda/models/qgemm_f64.py (pure Python 3)."""
import random

random.seed(3)
QF_K = 64


def run(TM, TN, E, C, T, bits, S):
    BM, BN = 16 * TM, 16 * TN
    XR = BM // 4
    WORDS = BN * (QF_K // 4) // 128
    per = 32 // bits
    wpg = QF_K // per
    mask = (1 << bits) - 1
    groups = C // QF_K
    wpr, gpr = C // per, C // QF_K
    # weights: codes packed per * words, a scale and a bias per (row, group)
    q = [[random.randrange(1 << bits) for _ in range(C)] for _ in range(E)]
    sc = [[random.randrange(1, 4) for _ in range(gpr)] for _ in range(E)]
    bi = [[random.randrange(-3, 4) for _ in range(gpr)] for _ in range(E)]
    words = [[sum(q[r][w * per + c] << (bits * c) for c in range(per)) for w in range(wpr)] for r in range(E)]
    x = [[random.randrange(-4, 5) for _ in range(C)] for _ in range(T)]
    want = [[sum(x[m][k] * (q[n][k] * sc[n][k // 64] + bi[n][k // 64]) for k in range(C)) for n in range(E)] for m in range(T)]
    ldy = E
    y = {}
    part = {}
    gx, gy = (E + BN - 1) // BN, (T + BM - 1) // BM
    for bz in range(S):
        for by in range(gy):
            for bx in range(gx):
                n0, m0 = bx * BN, by * BM
                g0, g1 = bz * groups // S, (bz + 1) * groups // S
                acc = {}  # (warp, lane, i, j, e)
                xs, ws = {}, {}

                def fetch(grp):
                    k0 = grp * QF_K
                    l = {}
                    for tid in range(128):
                        lane, warp = tid & 31, tid >> 5
                        for i in range(XR):
                            r = m0 + warp * XR + i
                            l[(tid, 'x', 2 * i)] = x[r][k0 + lane] if r < T else 0
                            l[(tid, 'x', 2 * i + 1)] = x[r][k0 + lane + 32] if r < T else 0
                        for i in range(WORDS):
                            e = tid + 128 * i
                            n, wi = e // wpg, e % wpg
                            inn = e < BN * wpg and n0 + n < E
                            l[(tid, 'w', i)] = words[n0 + n][grp * wpg + wi] if inn else 0
                            l[(tid, 's', i)] = sc[n0 + n][grp] if inn else 0
                            l[(tid, 'b', i)] = bi[n0 + n][grp] if inn else 0
                    return l

                nxt = fetch(g0)
                for grp in range(g0, g1):
                    for tid in range(128):
                        lane, warp = tid & 31, tid >> 5
                        for i in range(XR):
                            r = warp * XR + i
                            assert r < BM
                            xs[(r, lane)] = nxt[(tid, 'x', 2 * i)]
                            xs[(r, lane + 32)] = nxt[(tid, 'x', 2 * i + 1)]
                        for i in range(WORDS):
                            e = tid + 128 * i
                            n, wi = e // wpg, e % wpg
                            if e < BN * wpg:
                                assert n < BN
                                for c in range(per):
                                    ws[(n, wi * per + c)] = ((nxt[(tid, 'w', i)] >> (bits * c)) & mask) * nxt[(tid, 's', i)] + nxt[(tid, 'b', i)]
                    if grp + 1 < g1:
                        nxt = fetch(grp + 1)
                    for warp in range(4):
                        wm, wn = (warp >> 1) * TM * 8, (warp & 1) * TN * 8
                        for k in range(0, QF_K, 4):
                            # one m8n8k4 per (i, j): the lanes' fragments
                            for i in range(TM):
                                for j in range(TN):
                                    A = [[xs[(wm + 8 * i + (l >> 2), k + (l & 3))]] for l in range(32)]
                                    B = [[ws[(wn + 8 * j + (l >> 2), k + (l & 3))]] for l in range(32)]
                                    Am = [[0] * 4 for _ in range(8)]
                                    Bm = [[0] * 8 for _ in range(4)]
                                    for l in range(32):
                                        Am[l >> 2][l & 3] = A[l][0]
                                        Bm[l & 3][l >> 2] = B[l][0]
                                    for l in range(32):
                                        for e in range(2):
                                            rr, cc = l >> 2, 2 * (l & 3) + e
                                            key = (warp, l, i, j, e)
                                            acc[key] = acc.get(key, 0) + sum(Am[rr][kk] * Bm[kk][cc] for kk in range(4))
                for warp in range(4):
                    wm, wn = (warp >> 1) * TM * 8, (warp & 1) * TN * 8
                    for l in range(32):
                        fr, fk = l >> 2, l & 3
                        for i in range(TM):
                            for j in range(TN):
                                for e in range(2):
                                    m = m0 + wm + 8 * i + fr
                                    n = n0 + wn + 8 * j + 2 * fk + e
                                    if m >= T or n >= E:
                                        continue
                                    v = acc.get((warp, l, i, j, e), 0)
                                    if S == 1:
                                        assert (m, n) not in y, "written twice"
                                        y[(m, n)] = v
                                    else:
                                        assert (bz, m, n) not in part, "written twice"
                                        part[(bz, m, n)] = v
    if S > 1:  # route_select's sum, in split order
        for m in range(T):
            for n in range(E):
                y[(m, n)] = sum(part[(z, m, n)] for z in range(S))
    wrong = sum(1 for m in range(T) for n in range(E) if y.get((m, n)) != want[m][n])
    print(f"qf_gemm<{TM},{TN}> E {E} C {C} T {T} {bits}-bit splits {S}: outputs {T * E} wrong {wrong}")
    assert wrong == 0


for TM, TN in [(2, 2), (4, 4)]:
    run(TM, TN, E=40, C=192, T=37, bits=4, S=1)
    run(TM, TN, E=72, C=320, T=70, bits=8, S=2)  # 5 groups in 2 splits: 2 and 3
    run(TM, TN, E=33, C=256, T=5, bits=4, S=4)
print("ok")
