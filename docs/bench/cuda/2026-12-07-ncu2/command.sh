#!/bin/bash
# From the repository root on the GPU machine (an H100), carry ["devrun/nb"] (cuda.test of
# 121e42a), the tree's logs and PTX left out of the call; two calls:
bash docs/bench/cuda/run-ncu2.sh   # -> ncu-1.tgz
STALLS=1 NCU="gemm_gateup_w160rp:140:TestMeasureGEMM gemm_dense_w256rp:23:TestMeasureGEMM gdn_chunk_state_tf32_sk:6:TestMeasureDeltaForms" \
  bash docs/bench/cuda/run-ncu2.sh   # -> ncu-2.tgz
