#!/usr/bin/env python3
"""ktsum.py: a kernel trace of run-ktrace.sh (ktrace.c's CSV), summed.

Usage: ktsum.py TRACE.csv.gz [TOP]

The trace is split where the GPU idles for more than 0.2 ms. Each part of
more than 900 kernels after the first (the bench's timed prefills) and the
decode steps (from one embed_rows to the next, the last eight) are listed
kernel by kernel: launches, total device time, share, time per launch; for
decode, also the gaps between kernels and between steps."""
import collections, csv, gzip, sys

rows = [r for r in csv.DictReader(gzip.open(sys.argv[1], 'rt')) if not r['start'].startswith('#')]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 14
for r in rows:
    r['start'], r['end'] = int(r['start']), int(r['end'])
rows.sort(key=lambda r: r['start'])

def table(title, kernels, n=1):
    agg = collections.defaultdict(lambda: [0, 0])
    for r in kernels:
        a = agg[r['name']]
        a[0] += 1
        a[1] += r['end'] - r['start']
    busy = sum(v[1] for v in agg.values())
    print(f"---- {title}: busy {busy / n / 1e3:.1f} us, span {(kernels[-1]['end'] - kernels[0]['start']) / n / 1e3:.1f} us")
    for k, v in sorted(agg.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{k[:50]:50s} {v[0] / n:6.0f} {v[1] / n / 1e3:9.1f} us {100 * v[1] / busy:5.1f}%  {v[1] / v[0] / 1e3:7.1f} us/launch")

parts = [[rows[0]]]
for a, b in zip(rows, rows[1:]):
    if b['start'] - a['end'] > 200000:
        parts.append([])
    parts[-1].append(b)
for i, p in enumerate([p for p in parts if len(p) > 900][1:]):
    table(f"prefill {i}", p)
starts = [i for i, r in enumerate(rows) if r['name'] == 'embed_rows']
steps = [rows[a:b] for a, b in zip(starts[-9:-1], starts[-8:])]
if steps:
    table(f"decode, per step (mean of {len(steps)})", [r for s in steps for r in s], len(steps))
    gaps = [(b[0]['start'] - a[-1]['end']) / 1e3 for a, b in zip(steps, steps[1:])]
    inner = sum(b['start'] - a['end'] for s in steps for a, b in zip(s, s[1:])) / len(steps) / 1e3
    print(f"gaps between kernels of a step: {inner:.1f} us a step; between steps: " + " ".join(f"{g:.1f}" for g in gaps) + " us")
