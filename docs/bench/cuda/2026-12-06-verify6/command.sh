#!/bin/bash
# main at 63b5e69 (gemm=wg choosing w256o / w128o2 / w64o), devrun/ml holding
# cuda.test.gz and ref.txz as run-split.sh's header says. An H100; 93 s.
TESTS='TestOracleOnGPU|TestConformance|TestTensorCoreOpsMatchReferences|TestSnapshotRoundTripOnGPU|TestGEMMDense' \
MEASURE='TestMeasureNothing' TTIME=200 bash docs/bench/cuda/run-split.sh
