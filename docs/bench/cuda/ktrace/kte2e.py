#!/usr/bin/env python3
"""kte2e.py: what each kernel adds to a decoded token's time, from two traces.

Usage: kte2e.py A.csv.gz B.csv.gz

With programmatic dependent launch kernels overlap, and a kernel's own
duration (ktsum.py) counts the time it spends waiting for the one before.
Here each kernel is charged the time from the end of the kernel before it
to its own end, over the last seven decode steps of each trace (a step
begins at embed_rows), so that the charges sum to the step. Prints, per
kernel name, its launches a step and its charge a step in A and in B.
"""
import collections
import csv
import gzip
import sys


def charges(path):
    rows = list(csv.reader(gzip.open(path, "rt")))[1:]
    rows = sorted((int(r[0]), int(r[1]), r[7]) for r in rows)
    starts = [i for i, r in enumerate(rows) if r[2].startswith("embed_rows")]
    steps = [rows[starts[i]:starts[i + 1]] for i in range(len(starts) - 8, len(starts) - 1)]
    total, count = collections.defaultdict(float), collections.Counter()
    for st in steps:
        for before, k in zip(st, st[1:]):
            total[k[2]] += (k[1] - before[1]) / 1e3
            count[k[2]] += 1
    return {k: v / len(steps) for k, v in total.items()}, {k: n // len(steps) for k, n in count.items()}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, na = charges(sys.argv[1])
    b, nb = charges(sys.argv[2])
    print(f"{'kernel':28s} {'n':>4s} {'A us':>8s} {'B us':>8s}  {'A/launch':>8s} {'B/launch':>8s}")
    for k in sorted(a, key=lambda k: -a[k]):
        print(f"{k:28s} {na[k]:4d} {a[k]:8.1f} {b.get(k, 0):8.1f}  {a[k] / na[k]:8.2f} {b.get(k, 0) / max(nb.get(k, 1), 1):8.2f}")
    print(f"{'a step':28s} {'':4s} {sum(a.values()):8.1f} {sum(b.values()):8.1f}")


main()
