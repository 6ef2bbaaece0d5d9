#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/ml"]
# (devrun/ml: cuda.test.xz of the commit "TestMeasureGEMM reports the mixed tiles..." and ref.txz)
TESTS="TestOracleOnGPU|TestConformance|TestMoERouteGroups" MEASURE=TestMeasureGEMM MTIME=240 bash docs/bench/cuda/run-split.sh
