#!/bin/bash
# From the repository root on the GPU machine (an H200 came), main checked out, carry ["devrun/x1"]
# (petals.txz: petal of 09bcde2 (main), petal-v1 of ab1cc79 (exp/gnpre), petal-v2 of ba16bc5
# (exp/dw4), petal-v3 of ad333e4 (both); cuda.test.xz of ad333e4; qmv-v1.ptx.xz and moe-v2.ptx.xz,
# the two changed families' PTX; made by
#   TEST=exp/both bash docs/bench/cuda/devrun-pack.sh devrun/x1 petal=main petal-v1=exp/gnpre petal-v2=exp/dw4 petal-v3=exp/both
bash docs/bench/cuda/run-gnpre1.sh   # -> env.txt, logs.tgz (tests, benches, kernel traces)
# sass-v3.tgz came back too: its qmv cubin (v1's qmv.ptx) is engine/cuda/kernels/sass's as of 7ffda47.
# The kernel traces compared: python3 docs/bench/cuda/ktrace/kte2e.py ktrace-kt-main.csv.gz ktrace-kt-v3.csv.gz
# run-gnpre1.sh has since been rewritten onto lib.sh's cubin_into, cuda_tests and variant_rounds: the same commands.
