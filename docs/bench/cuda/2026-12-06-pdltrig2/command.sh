#!/bin/bash
# From the repository root on the GPU machine (an H100 came), carry ["devrun/pt2"]
# (petals.txz: petal of 91116bc, petal-md = 91116bc with moe_down's pdl_trigger() right after its
# pdl_begin(), petal-main of c8c01a2, petal-old of dfa76fa; kernels.txz: 91116bc's PTX, sass.sh and
# petal-md's moe.ptx; cuda.test.xz of 91116bc; -tags nofixture):
bash docs/bench/cuda/run-pdltrig2.sh   # -> env.txt, logs.tgz (tests, benches, kernel traces, sass.txt)
# sass.tgz and sass-md.tgz came back too: their cubins (91116bc's, with petal-md's moe cubin and
# manifest line) are engine/cuda/kernels/sass as of the commit that landed petal-md's kernels.
# The kernel traces compared (charges from the end of the kernel before):
#   python3 docs/bench/cuda/ktrace/kte2e.py ktrace-kt-on.csv.gz ktrace-kt-md-on.csv.gz
#   python3 docs/bench/cuda/ktrace/kte2e.py <pdllate1>/ktrace-kt-late.csv.gz ktrace-kt-md-on.csv.gz
