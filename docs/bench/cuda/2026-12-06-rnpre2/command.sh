#!/bin/bash
# Here: petal of main (9eee70f) and of each variant branch, the test binary
# of v4, the variants' changed families' PTX:
#   TEST=exp/rall bash docs/bench/cuda/devrun-pack.sh devrun/x3 petal=main petal-v1=exp/rnpre \
#     petal-v2=exp/rnpre2 petal-v3=exp/gdnpre petal-v4=exp/rall petal-v5=exp/mdpre petal-v6=exp/atpre petal-v7=exp/acomb
#   bash docs/bench/cuda/devrun-pack.sh /tmp/x89 petal-v8=exp/gupre petal-v9=exp/qpipe && cp /tmp/x89/petals.txz devrun/x3/petals2.txz
#   (for each variant vN and family F it changed: git show BRANCH:engine/cuda/kernels/F.ptx > F-vN.ptx; tar cJf devrun/x3/ptx.txz *.ptx)
#   git ls-files 'docs/bench/cuda/2026-*' 'bench/results' | xargs rm -f   # the carry's room
# On the GPU machine (an H100 came), from the repository root, carry ["devrun/x3"]:
bash docs/bench/cuda/run-rnpre2.sh   # -> env.txt, logs.tgz (sass.tgz: the variants' cubins, not kept here but moe's of v5)
