#!/bin/bash
# main at 63b5e69's tree plus run-ncu.sh (devrun/nc holding cuda.test.gz of that build); an H100; 57 s.
DEVRUN=devrun/nc NTIME=110 SRC=1 NCU='gemm_dense_w128o2:23:TestMeasureGEMM gemm_gateup_w128o2:138:TestMeasureGEMM gemm_gateup_s16:0:TestMeasureGEMM gdn_chunk_state_ilp:6:TestMeasureDeltaForms gdn_chunk_prep:18:TestMeasureDeltaForms' \
  bash docs/bench/cuda/run-ncu.sh
