#!/bin/bash
# From the repository root on the GPU machine (an H100), carry ["devrun/d2"] (petal-v1 and
# cuda.test of 6529228, petal-old of 17f8052, petal-v2 .. petal-v4 of the variant commits
# 4ce3581, 4672e3f, 01934fa (6529228 with GEMM_RA_LATE_LOAD, GEMM_RA_DEEP, both set to 1; not
# kept), all -tags nofixture, devrun/d2/BUILT_FROM; and ptx-v2 .. ptx-v4, each variant's
# gemm_wg, gemm_fit and gemm_downbf PTX), the tree's logs and PTX left out of the call but
# gemm_wg.ptx, gemm_fit.ptx and gemm_downbf.ptx:
bash docs/bench/cuda/run-deq2.sh
#   -> env.txt, logs.tgz, sass.tgz (v1's cubins, committed in engine/cuda/kernels/sass)
