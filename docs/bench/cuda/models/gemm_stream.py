#!/usr/bin/env python3
"""gemm_stream.py: a model of gemm.cu's gemm_stream (moe=stream), checked
on the CPU before a GPU runs it.

1. The mma's fragments: with lane c holding elements 32c .. 32c+31 of a
   128-column block and k-step s taking the pairs P[2(s/4)][s%4] and
   P[2(s/4)+1][s%4] (P[w][j] = elements 8w+j and 8w+j+4 of the lane's
   chunk), eight m16n8k16 products over the block give X·Wᵀ.
2. The staged X chunks' swizzle: a quarter warp's 16-byte loads hit eight
   distinct bank groups.
3. The kernel's indexing, transcribed: items over a grid of any size,
   passes, the ring's steps, X staged through rowTok, the epilogue's
   outputs: every output written once, equal (exactly, small integers) to
   its definition, for gate/up and down, experts of 0, 1 and 2 tiles,
   N off the item size; for 16-row tiles (s16 and its variants) and 32-row
   ones (s32: two m16 tiles a warp), and the copies' cursor and X staging's
   walk against their definitions.

Run: python3 docs/bench/cuda/models/gemm_stream.py (pure Python 3)."""
import random
random.seed(1)
K=128
Wt=[[random.gauss(0,1) for _ in range(K)] for _ in range(8)]
Xm=[[random.gauss(0,1) for _ in range(K)] for _ in range(16)]
def P(v,c,w,j):
    b=32*c+8*w; return (v[b+j],v[b+j+4])
acc=[[0.0]*8 for _ in range(16)]
for s in range(8):
    w0=2*(s>>2); jj=s&3
    A=[[0.0]*16 for _ in range(16)]; B=[[0.0]*8 for _ in range(16)]
    for g in range(8):
        for c in range(4):
            b0=P(Wt[g],c,w0,jj); b1=P(Wt[g],c,w0+1,jj)
            B[2*c][g],B[2*c+1][g]=b0; B[2*c+8][g],B[2*c+9][g]=b1
            a0=P(Xm[g],c,w0,jj); a1=P(Xm[g+8],c,w0,jj); a2=P(Xm[g],c,w0+1,jj); a3=P(Xm[g+8],c,w0+1,jj)
            A[g][2*c],A[g][2*c+1]=a0; A[g+8][2*c],A[g+8][2*c+1]=a1; A[g][2*c+8],A[g][2*c+9]=a2; A[g+8][2*c+8],A[g+8][2*c+9]=a3
    for m in range(16):
        for n in range(8):
            acc[m][n]+=sum(A[m][k]*B[k][n] for k in range(16))
err=max(abs(acc[m][n]-sum(Xm[m][k]*Wt[n][k] for k in range(K))) for m in range(16) for n in range(8))
assert err < 1e-9, err
print("fragments: max error", err)
def phys(L,r): return L ^ ((L>>3)&1) ^ ((r&1)<<1)
for kb in range(2):
  for w in range(4):
    for h in range(2):
      for q in range(4):
        gs=set(phys(kb*16+(l&3)*4+w,(l>>2)+8*h)%8 for l in range(8*q,8*q+8))
        assert len(gs)==8,(kb,w,q,gs)
print("swizzle ok")
# X staging's walk, transcribed: each thread starts at chunk tid (srow, sch)
# and advances a block's threads at a time by (drow, dch) with one carry,
# twice over the same eight chunks (loads, then stores): it must visit
# divmod(x, cpr) for every chunk x it handles, and the threads together
# every chunk once.
def staging_walk(K, NTHREADS, MT=1):
    cpr = K // 8; chunks = 16 * MT * cpr
    drow, dch = NTHREADS // cpr, NTHREADS % cpr
    seen = set()
    for tid in range(NTHREADS):
        row, ch = tid // cpr, tid % cpr
        for x0 in range(tid, chunks, 8 * NTHREADS):
            row1, ch1 = row, ch
            for u in range(8):
                x = x0 + u * NTHREADS
                if x < chunks: assert (row, ch) == divmod(x, cpr), ("load", K, NTHREADS, tid, x)
                row += drow; ch += dch
                if ch >= cpr: row += 1; ch -= cpr
            row, ch = row1, ch1
            for u in range(8):
                x = x0 + u * NTHREADS
                if x < chunks:
                    assert (row, ch) == divmod(x, cpr), ("store", K, NTHREADS, tid, x)
                    assert x not in seen; seen.add(x)
                row += drow; ch += dch
                if ch >= cpr: row += 1; ch -= cpr
    assert len(seen) == chunks
for K in (128, 256, 384, 512, 1024, 2048, 4096, 8192):
    for NTHREADS in (256, 512):
        for MT in (1, 2):
            staging_walk(K, NTHREADS, MT)
print("staging walk ok")
def run(mode, E, N, K, counts, grid, WARPS=16, NT=4, RING=3, MT=1):
    BM = 16 * MT
    HALF = NT // 2
    OUT_W = HALF * 8 if mode == 'gateup' else NT * 8
    PASSES = 1 if mode == 'gateup' else 2
    OUT_B = OUT_W * WARPS * PASSES
    wpr, gpr = K // 8, K // 64
    T = sum(counts)
    # weights: W[e*N+n][k] = q*s + b, q 0..15, s/b per (row, group)
    def mk():
        q = [[random.randint(0, 15) for _ in range(K)] for _ in range(E * N)]
        sb = [[(random.randint(1, 3), random.randint(-2, 2)) for _ in range(gpr)] for _ in range(E * N)]
        return q, sb
    W, W2 = mk(), mk()
    def wval(Wm, row, k):
        q, sb = Wm; s, b = sb[row][k // 64]; return q[row][k] * s + b
    X = [[random.randint(-3, 3) for _ in range(K)] for _ in range(64)]
    # tile map as moe_route makes it: rows sorted by expert, 16-row tiles
    offsets = [0]
    for c in counts: offsets.append(offsets[-1] + c)
    rowTok = [random.randrange(64) for _ in range(T)]
    tiles = []
    for e, c in enumerate(counts):
        for j in range((c + BM - 1) // BM): tiles.append((e, offsets[e] + BM * j))
    ntiles = len(tiles)
    # the kernel
    nch = (N + OUT_B - 1) // OUT_B; items = ntiles * nch; kblocks = K // 128; per = PASSES * kblocks
    Y = {}
    for bid in range(grid):
        mine = (items - bid + grid - 1) // grid if bid < items else 0
        for warp in range(WARPS):
            ring = {}
            # the copies' cursor (qi, qp, qkb; qe, qob), advanced a step an issue
            cur = {'qi': 0, 'qp': 0, 'qkb': 0, 'qe': 0, 'qob': 0}
            def locate():
                if cur['qi'] < mine:
                    item = bid + cur['qi'] * grid
                    cur['qe'] = tiles[item // nch][0]; cur['qob'] = (item % nch) * OUT_B
            locate()
            def issue(q):
                if cur['qi'] >= mine: return
                # the definition, for the cursor's check: step q of the block
                assert cur['qi'] == q // per and cur['qp'] * kblocks + cur['qkb'] == q % per, "cursor"
                e, p, kb = cur['qe'], cur['qp'], cur['qkb']
                ob = cur['qob'] + (p * WARPS + warp) * OUT_W
                cur['qkb'] += 1
                if cur['qkb'] == kblocks:
                    cur['qkb'] = 0; cur['qp'] += 1
                    if cur['qp'] == PASSES:
                        cur['qp'] = 0; cur['qi'] += 1; locate()
                slot = {}
                for j in range(NT):
                    for lane in range(32):
                        g, c = lane >> 2, lane & 3
                        n = ob + ((j % HALF) if mode == 'gateup' else j) * 8 + g
                        up = mode == 'gateup' and j >= HALF
                        v = n < N
                        row = e * N + (n if v else 0)
                        Wm = W2 if up else W
                        word0 = kb * 16 + c * 4  # u32 words of the row
                        grp = kb * 2 + (c >> 1)
                        if v:
                            codes = [Wm[0][row][8 * word0 + i] for i in range(32)]
                            s, b = Wm[1][row][grp]
                            assert all((8 * word0 + i) // 64 == grp for i in range(32)), "sb group"
                            slot[(j, lane)] = [x * s + b for x in codes]
                        else:
                            slot[(j, lane)] = [0] * 32  # zero fill: codes 0, sb 0 -> 0
                ring[q % RING] = (q, slot)
            for q in range(RING - 1): issue(q)
            q = 0
            acc = [[[0] * 8 for _ in range(BM)] for _ in range(NT)]
            for i in range(mine):
                item = bid + i * grid; t = item // nch
                e, r0 = tiles[t]; rend = min(offsets[e + 1], r0 + BM)
                xs = {}
                cpr = K // 8
                for x in range(BM * cpr):
                    row, ch = x // cpr, x % cpr; r = r0 + row
                    vals = X[rowTok[r] if mode == 'gateup' else r][ch * 8:ch * 8 + 8] if r < rend else [0] * 8
                    L = ch
                    phys = L ^ ((L >> 3) & 1) ^ ((row & 1) << 1)
                    xs[(row, phys)] = vals
                for p in range(PASSES):
                    for kb in range(kblocks):
                        issue(q + RING - 1)
                        qq, slot = ring[q % RING]
                        assert qq == q
                        # the A fragments: lane (g, c) holds X rows 16mt + g and 16mt + g+8 at its chunks
                        xa = {}
                        for lane in range(32):
                            g, c = lane >> 2, lane & 3
                            for mt in range(MT):
                              for h in range(2):
                                row = 16 * mt + g + 8 * h
                                xv = []
                                for w in range(4):
                                    L = kb * 16 + c * 4 + w
                                    xv += xs[(row, L ^ ((L >> 3) & 1) ^ ((row & 1) << 1))]
                                xa[(row, c)] = xv
                        for j in range(NT):
                            # the mma: acc(row, col) += sum over c of A(row, c's k) . B(c's k, col),
                            # B's column col held by lane (col, c)
                            for row in range(BM):
                                for col in range(8):
                                    acc[j][row][col] += sum(sum(a * b for a, b in zip(xa[(row, c)], slot[(j, col * 4 + c)])) for c in range(4))
                        q += 1
                    ob = (item % nch) * OUT_B + (p * WARPS + warp) * OUT_W
                    for rr in range(BM):
                        r = r0 + rr
                        if r >= rend: continue
                        for c in range(4):
                            if mode == 'gateup':
                                for j in range(HALF):
                                    n = ob + j * 8 + 2 * c
                                    if n >= N: continue
                                    for ii in range(2):
                                        key = (r, n + ii)
                                        assert key not in Y, ("written twice", key)
                                        Y[key] = (acc[j][rr][2 * c + ii], acc[j + HALF][rr][2 * c + ii])
                            else:
                                for j in range(NT):
                                    n = ob + j * 8 + 2 * c
                                    if n >= N: continue
                                    for ii in range(2):
                                        key = (r, n + ii)
                                        assert key not in Y, ("written twice", key)
                                        Y[key] = acc[j][rr][2 * c + ii]
                    acc = [[[0] * 8 for _ in range(BM)] for _ in range(NT)]
    # check against the definition
    bad = 0
    for e in range(E):
        for r in range(offsets[e], offsets[e + 1]):
            xr = X[rowTok[r] if mode == 'gateup' else r]
            for n in range(N):
                gsum = sum(xr[k] * wval(W, e * N + n, k) for k in range(K))
                if mode == 'gateup':
                    usum = sum(xr[k] * wval(W2, e * N + n, k) for k in range(K))
                    if Y.get((r, n)) != (gsum, usum): bad += 1
                else:
                    if Y.get((r, n)) != gsum: bad += 1
    print(mode, f"{WARPS} warps, {NT} n-tiles, ring {RING}, {BM}-row tiles:", "E", E, "N", N, "K", K, "counts", counts, "grid", grid, "outputs", len(Y), "wrong", bad)
    assert bad == 0 and len(Y) == T * N
run('gateup', 3, 128, 256, [20, 5, 0], 2)
run('down', 2, 272, 256, [3, 17], 3)
run('gateup', 2, 512, 384, [17, 9], 3)
run('down', 2, 1040, 128, [16, 1], 4)
for nt, ring in [(4, 4), (8, 2)]:  # the variants s16r4 and s16n8
    run('gateup', 2, 512, 384, [17, 9], 3, NT=nt, RING=ring)
    run('down', 2, 1040, 256, [16, 1], 4, NT=nt, RING=ring)
for counts in ([17, 9], [33, 20, 0, 5]):  # the variant s32: 32-row tiles, 8 warps, a ring of 4
    run('gateup', len(counts), 256, 384, counts, 3, WARPS=8, RING=4, MT=2)
    run('down', len(counts), 528, 256, counts, 4, WARPS=8, RING=4, MT=2)
