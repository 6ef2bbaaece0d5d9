#!/usr/bin/env python3
"""gemm_split.py: a model of the split-K dense GEMM's partials (gemm.cu's
gemm_tile with a grid of Z > 1 and gemm_sum_splits; engine/cuda/gemm.go's
DenseSplit), checked on the CPU before a GPU runs the grouped form.

The layout, transcribed: DenseSplit gives matrix i of a group the partials
from 4·splits·M·(rows of the matrices before it) bytes of parts; block z of
gemm_tile writes its sums of k-tiles [z·KT/Z, (z+1)·KT/Z) to its matrix's
partials + z·M·N_i, row-major [M][N_i]; gemm_sum_splits, four floats a
thread, finds the matrix of its element from the table's starts and adds
the splits in order into y_i. Every y element must be the sum over its
k-tiles, each k-tile counted once, every partial written once, and no
thread's four floats may straddle two matrices.

Run: python3 docs/bench/cuda/models/gemm_split.py (pure Python 3)."""
import random

random.seed(5)
QMV_GROUP = 4


def run(Ns, M, KT, splits):
    # DenseSplit's partial pointers (in floats)
    ps, at = [], 0
    for N in Ns:
        ps.append(at)
        at += splits * M * N
    start = [0]
    for N in Ns:
        start.append(start[-1] + N)
    # the contribution of k-tile kt to y_i[r][n]: a distinct power of two a k-tile
    val = lambda i, r, n, kt: (1 << kt) * (1 + (i * 7 + r * 3 + n) % 5)
    parts = {}
    # gemm_tile: block z of matrix i (group entry: Y = its partials; then + z·M·N)
    for z in range(splits):
        kt0, kt1 = z * KT // splits, (z + 1) * KT // splits
        for i, N in enumerate(Ns):
            base = ps[i] + z * M * N
            for r in range(M):
                for n in range(N):
                    a = base + r * N + n
                    assert a not in parts, "a partial written twice"
                    parts[a] = sum(val(i, r, n, kt) for kt in range(kt0, kt1))
    assert len(parts) == at, "a partial not written"
    # gemm_sum_splits
    y = {}
    total = M * start[len(Ns)]
    nthreads = (total + 1023) // 1024 * 256
    for t in range(nthreads):
        a = t * 4
        if a >= total:
            continue
        i = 0
        for m in range(1, QMV_GROUP):
            if m < len(Ns) and a >= M * start[m]:
                i = m
        n = M * (start[i + 1] - start[i])
        j = a - M * start[i]
        assert j + 4 <= n, "four floats straddle two matrices"
        p = splits * M * start[i] + j
        for u in range(4):
            v = sum(parts[p + z * n + u] for z in range(splits))
            key = (i, j + u)
            assert key not in y
            y[key] = v
    for i, N in enumerate(Ns):
        for r in range(M):
            for n in range(N):
                want = sum(val(i, r, n, kt) for kt in range(KT))
                assert y[(i, r * N + n)] == want, (i, r, n)
    print(f"matrices {Ns} M {M} k-tiles {KT} splits {splits}: {total} outputs right")


run([1040, 512, 32, 32], 7, 32, 2)
run([1040, 512, 32, 32], 16, 32, 8)
run([264, 8, 136, 72], 16, 5, 3)
run([2048], 4, 64, 16)
print("ok")
