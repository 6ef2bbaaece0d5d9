#!/bin/bash
# From the repository root on the GPU machine (an H100, env.txt), carry ["devrun/f4"]: petal and
# cuda.test of 5a37e61, the variant late6 (GEMM_RA_LATE_LOAD=6, fd05909) made by variant-pack.sh
# (its petal and PTX), the oracle's ref.txz; the tree's logs and PTX left out of the call but
# gemm_wg, gemm_fit, gemm_downbf, gemm_fitw and gemm_ws.ptx:
bash docs/bench/cuda/run-fw4.sh 2>&1 | tail -60
#   -> logs-1.tgz (oracle.txt: TestOracleOnGPU under the defaults and delta=tf32; tests.txt:
#      TestCubinsLoad, TestDefaultsHaveCubins, TestGEMMProducerMatchesUndrained; measure-gemm.txt:
#      w256rp against w256rs; ptxas-gemm_ws.txt), logs.tgz (the prefill rounds
#      bench-ROUND-BUILD-BACKEND, the routenorm=cluster decode rounds bench-rcl-*, tests-rcl.txt),
#      ptxas.tgz (late6's families), env.txt; sass.tgz (s-late6/, late6 did not win) not kept
