#!/bin/bash
# From the repository root on the GPU machine (an H100, env-tests.txt), carry ["devrun/r21"]:
# petal and cuda.test of 4b98411 (TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/r21
# petal=HEAD) and the oracle's ref.txz; the tree's logs, results, tokenizer test data and PTX
# left out of the call but norm_bfo.ptx and attn_prep.ptx:
LIMIT=170 bash docs/bench/cuda/run-report21.sh 2>&1 | tail -80
#   -> tests.txt (TestDefaultsHaveCubins, TestConformance/default, TestNormBF16MatchesApart,
#      TestNormBF16MoEMatchesApart, TestNormF32LeanMatchesFull, TestAttnPrepMatchesApart),
#      oracle.txt (TestOracleOnGPU under the defaults, moefit=on, normbf=moe, normf32=lean,
#      attnprep=on), report.tgz (the fourteenth report, bench/results/2026-12-07-h100-cuda-14),
#      sass.tgz (the cubins of norm_bfo and attn_prep: engine/cuda/kernels/sass; ptxas-*.txt here)
