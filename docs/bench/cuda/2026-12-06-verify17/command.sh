#!/bin/bash
# Here: the test binary of 3891835 and the oracle's reference, then the tree
# without its logs (the carry's room) for the call:
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/o9 petal=HEAD && rm devrun/o9/petals.txz
#   tar cJf devrun/o9/ref.txz -C ../shared/oracle reference
#   git ls-files 'docs/bench/cuda/2026-*' 'bench/results' | xargs rm -f
# On the GPU machine (an H100 came), from the repository root, carry ["devrun/o9"]:
bash docs/bench/cuda/run-verify17.sh   # -> verify.tgz (unpacked here)
