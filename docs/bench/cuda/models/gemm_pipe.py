#!/usr/bin/env python3
"""gemm_pipe.py: a model of gemm_tile's k loop (gemm.cu), both forms, run
against its hazards on the CPU before a GPU runs the pipelined one.

The schedule, transcribed: S stages of cp.async copies (a commit group a
k-tile, empty groups past the last), the W tile (PIPE = 0) or two W tiles
(PIPE = 1), barriers where the kernel has __syncthreads. Two threads are
modelled, so that a barrier is what orders one thread's writes before
another's reads: each does its share of the copies, the dequantisation and
the mma (which reads every thread's part of a stage's X tile and of a W
tile). The model checks, for every k-tile count and both forms, that:
  - a stage is read (dequant: its codes; mma: its X tile) only once every
    thread's copies of that k-tile have landed and a barrier has passed
    since (cp.async's data is seen by other threads after the wait and a
    barrier);
  - a W tile is read by the mma only after every thread wrote its share
    of that k-tile, with a barrier between;
  - no copy or dequantisation overwrites a stage or W tile that some
    thread has yet to read for an earlier k-tile;
  - every k-tile is multiplied exactly once, in order.

Run: python3 docs/bench/cuda/models/gemm_pipe.py (pure Python 3)."""

THREADS = 2


class Hazard(Exception):
    pass


def run(S, nkt, pipe, wait_as_unpipelined=False):
    # per stage: the k-tile it holds, and which threads' copies have landed
    stage_tile = [None] * S
    landed = [set() for _ in range(S)]
    pending = [[] for _ in range(THREADS)]  # per thread: its commit groups, each a list of (stage, tile)
    # readers still owed per (buffer, tile): a read must come before the next write
    w_tile = [None, None]
    w_written = [set(), set()]
    epoch = 0  # barriers passed
    seen_at = {}  # (kind, index, tile) -> barrier epoch at which all threads' writes became visible
    done = []

    def load(thread, kt):
        group = []
        if kt < nkt:
            st = kt % S
            if stage_tile[st] not in (None, kt):
                # overwriting: every k-tile it held must be fully used
                old = stage_tile[st]
                if ("x", old) not in used or ("codes", old) not in used:
                    raise Hazard(f"S={S} nkt={nkt} pipe={pipe}: stage {st} overwritten by k-tile {kt} before k-tile {old} was used")
            if stage_tile[st] != kt:
                stage_tile[st] = kt
                landed[st] = set()
            group.append((st, kt))
        pending[thread].append(group)

    def wait(thread, n):  # cp.async.wait_group n
        while len(pending[thread]) > n:
            for st, kt in pending[thread].pop(0):
                if stage_tile[st] == kt:
                    landed[st].add(thread)

    def barrier():
        nonlocal epoch
        epoch += 1
        for st in range(S):
            if stage_tile[st] is not None and len(landed[st]) == THREADS:
                seen_at.setdefault(("stage", st, stage_tile[st]), epoch)
        for b in range(2):
            if w_tile[b] is not None and len(w_written[b]) == THREADS:
                seen_at.setdefault(("w", b, w_tile[b]), epoch)

    used = set()

    def read_stage(kt, what):
        st = kt % S
        if stage_tile[st] != kt or ("stage", st, kt) not in seen_at:
            raise Hazard(f"S={S} nkt={nkt} pipe={pipe}: {what} of k-tile {kt} read before its copies landed and a barrier passed")

    def dequant(thread, kt, b):
        read_stage(kt, "codes")
        if thread == THREADS - 1:
            used.add(("codes", kt))
        if w_tile[b] not in (None, kt):
            old = w_tile[b]
            if ("mma", old) not in used:
                raise Hazard(f"S={S} nkt={nkt} pipe={pipe}: W tile {b} overwritten with k-tile {kt} before k-tile {old}'s mma")
        if w_tile[b] != kt:
            w_tile[b] = kt
            w_written[b] = set()
        w_written[b].add(thread)

    def mma(thread, kt, b):
        read_stage(kt, "X")
        if w_tile[b] != kt or ("w", b, kt) not in seen_at:
            raise Hazard(f"S={S} nkt={nkt} pipe={pipe}: mma of k-tile {kt} read W tile {b} before it was written and a barrier passed")
        if thread == THREADS - 1:
            used.add(("x", kt))
            used.add(("mma", kt))
            done.append(kt)

    # the prologue
    for thread in range(THREADS):
        for kt in range(S - 1):
            load(thread, kt)
    if pipe and nkt > 0:
        for thread in range(THREADS):
            wait(thread, S - 2)
        barrier()
        for thread in range(THREADS):
            dequant(thread, 0, 0)
    for kt in range(nkt):
        for thread in range(THREADS):
            wait(thread, S - 3 if pipe and not wait_as_unpipelined else S - 2)
        barrier()
        for thread in range(THREADS):
            load(thread, kt + S - 1)
        if pipe:
            # each thread: its dequantisation of kt+1 spread over kt's k-steps
            for thread in range(THREADS):
                if kt + 1 < nkt:
                    dequant(thread, kt + 1, (kt + 1) & 1)
                mma(thread, kt, kt & 1)
        else:
            for thread in range(THREADS):
                dequant(thread, kt, 0)
            barrier()
            for thread in range(THREADS):
                mma(thread, kt, 0)
    for thread in range(THREADS):
        wait(thread, 0)
    if done != list(range(nkt)):
        raise Hazard(f"S={S} nkt={nkt} pipe={pipe}: k-tiles multiplied {done}")


def main():
    cases = 0
    for pipe in (False, True):
        for S in (3, 4):
            for nkt in range(0, 20):
                run(S, nkt, pipe)
                cases += 1
    # the model catches what it is for: a pipelined loop that waits as the
    # unpipelined one does reads k-tile kt+1's codes before they land
    try:
        run(3, 4, True, wait_as_unpipelined=True)
    except Hazard as e:
        print("caught, as it should be:", e)
    else:
        raise SystemExit("the model missed a wait one k-tile short")
    print(f"gemm_tile's k loop: {cases} cases (both forms, S = 3 and 4, 0-19 k-tiles) free of hazards")


if __name__ == "__main__":
    main()
