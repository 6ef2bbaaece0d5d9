#!/bin/bash
# From the repository root on the GPU machine (an H100, env-tests.txt), in the call of
# ../2026-12-08-pair1/command.sh, right after run-pair1.sh: carry ["devrun/r22"], petal and
# cuda.test of b506cfd and the oracle's ref.txz; the tree's logs, results, tokenizer test data
# and PTX left out of the call but gdn_chunk_pair.ptx.
CARRY=devrun/r22 bash docs/bench/cuda/run-report22.sh 2>&1 | tail -45
#   -> tests.txt (TestDefaultsHaveCubins, TestConformance/default, TestQKRowsMatchPrep,
#      TestChunkedDeltaFlowMatchesFrag, TestCombineNormMatchesApart,
#      TestNormCombKernelMatchesLauncher), oracle.txt (TestOracleOnGPU under the defaults,
#      qkrows=block, deltaflow=on, combinenorm=on), report.tgz (the fifteenth report,
#      bench/results/2026-12-08-h100-cuda-15)
