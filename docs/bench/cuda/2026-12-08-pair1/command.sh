#!/bin/bash
# From the repository root on the GPU machine (an H100, ../2026-12-08-report22/env-tests.txt),
# carry ["devrun/r22"]: petal and cuda.test of b506cfd (TEST=HEAD bash
# docs/bench/cuda/devrun-pack.sh devrun/r22 petal=HEAD) and the oracle's ref.txz; the tree's
# logs, results, tokenizer test data and PTX left out of the call but gdn_chunk_pair.ptx.
# One call, run-pair1.sh as at b506cfd then run-report22.sh (../2026-12-08-report22), 140 s in all
# (run-pair1.sh's rounds since go through lib.sh's config_rounds, the files then named
# 1-petal-cuda.txt where these are 1-cuda.txt):
(CARRY=devrun/r22 bash docs/bench/cuda/run-pair1.sh 2>&1 | tail -40; CARRY=devrun/r22 bash docs/bench/cuda/run-report22.sh 2>&1 | tail -45) 2>&1 | tail -85
#   -> pair-tests.txt (TestDeltaChunkKernelMatchesLauncher, TestChunkedDeltaPairMatchesFrag,
#      TestMeasureDeltaForms, TestOracleOnGPU under the defaults and deltapair=on),
#      pair-rounds.tgz (prefill of 4K and 16K tokens, the defaults and deltapair=on, two rounds),
#      sass-pair.tgz (gdn_chunk_pair's cubin: engine/cuda/kernels/sass)
