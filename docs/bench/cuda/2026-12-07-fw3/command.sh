#!/bin/bash
# From the repository root on the GPU machine (an H100, env.txt), carry ["devrun/fw"]: petal of
# 980deb5, cuda.test of 059c700 (w256rs's producer three k-tiles ahead), and the variants made by
# variant-pack.sh on a1e2968: late (GEMM_RA_LATE_LOAD=4, fb09ca1) and lateall (=7, 6f8e02d), their
# petal, PTX, and lateall's test binary; the tree's logs and PTX left out of the call but gemm_wg,
# gemm_fit, gemm_downbf, gemm_fitw and gemm_ws.ptx; no ref.txz (the carry and tree came to 66.5 MB
# with it, refused):
ROUNDS=2 bash docs/bench/cuda/run-fw3.sh 2>&1 | tail -90
#   -> logs-1.tgz (measure-gemm.txt: HEAD's w64rp, w128rp, w256rp and w256rs; measure-gemm-lateall.txt;
#      tests-ws.txt, tests-lateall.txt), logs.tgz (the prefill rounds: bench-ROUND-BUILD-BACKEND),
#      ptxas.tgz, env.txt; sass.tgz (s-late/, s-lateall/) not kept here: s-late's gemm_wg cubin is
#      committed in engine/cuda/kernels/sass
