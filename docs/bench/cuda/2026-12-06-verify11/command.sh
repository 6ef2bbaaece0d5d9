#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/ml"]
# (devrun/ml: cuda.test.xz of 4b025cf, the cubins embedded, and ref.txz, as run-split.sh says)
TESTS='TestOracleOnGPU|TestConformance|TestCubinsLoad|TestMoERouteGroups' MEASURE='^$' MTIME=10 bash docs/bench/cuda/run-split.sh
