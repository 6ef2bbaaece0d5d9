#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/ml"]
# (devrun/ml: cuda.test.gz of the commit making qgemm_f64_h the router kernel from 512 rows, built before
# it was committed, and ref.txz, as run-split.sh says)
TESTS='TestOracleOnGPU|TestConformance|TestRouterTensorCores' MEASURE='TestMeasureRouter' MTIME=60 bash docs/bench/cuda/run-split.sh
