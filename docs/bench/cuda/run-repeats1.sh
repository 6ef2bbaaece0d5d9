#!/bin/bash
# run-repeats1.sh: main after 2026-12-07-delta1 (the losing decode forms
# removed, delta=tf32 off by default, 7ffda47's early rows in
# qmv_group_norm) against dfa76fa at the C++/CUDA engine's lengths: lib.sh's
# peer_repeats (prefill of 512 / 4K / 16K tokens, decode at 256 / 4K / 16K,
# three runs a length, the median, two alternating rounds), the short part
# of run-report16.sh for a call too short for the whole report. From the
# repository root; $CARRY (default devrun/rp) holds petals.txz with petal
# and petal-old (devrun-pack.sh devrun/rp petal=HEAD petal-old=dfa76fa).
# About 3 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; B=$R/${CARRY:-devrun/rp}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd $B && tar xJf petals.txz)
gpu_env "$O/env.txt"
peer_repeats "$B" "$O"
for f in /tmp/rp/bench-repeats-*.txt; do echo "$(basename $f)"; grep -E '^ +[0-9]+K? ' $f; done
