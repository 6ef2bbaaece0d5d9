#!/bin/bash
# main at 3ff4ece (the defaults from 2026-12-06-pipe1: gdn_chunk_state_ilp, qgemm_f64_w from 1024
# rows, splitk=all, moe=stream), devrun/ml holding cuda.test.gz and ref.txz as run-split.sh's header
# says. An H100 (the call's card); 34 s.
TESTS='TestOracleOnGPU|TestConformance|TestTensorCoreOpsMatchReferences|TestSnapshotRoundTripOnGPU' \
MEASURE='TestMeasureDeltaForms' TTIME=120 bash docs/bench/cuda/run-split.sh
# All four pass; the oracle under the new defaults top-1 98.4-100 %, mean KL 7.1e-5 to 1.7e-4 (as
# verify4 and split1), and under the former defaults (moe=smem,splitk=on) and the seven other
# settings. TestMeasureDeltaForms again: the delta rule of 4096 tokens 861 us with
# gdn_chunk_state_ilp against 907 with gdn_chunk_state, 512 tokens 128 against 133.
