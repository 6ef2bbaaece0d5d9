#!/bin/bash
# From the repository root on the GPU machine (an H100), carry ["devrun/dq"] (cuda.test and
# petal of 4bfb59c, petal-old of 17f8052, -tags nofixture, and the oracle's reference;
# devrun/dq/BUILT_FROM), the tree's logs and PTX left out of the call but gemm_wg.ptx,
# gemm_fit.ptx and gemm_downbf.ptx:
bash docs/bench/cuda/run-deq1.sh
#   -> env.txt, logs.tgz, sass.tgz (not committed: w160rp spilled, the form changed after)
