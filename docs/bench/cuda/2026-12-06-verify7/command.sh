#!/bin/bash
# from the repository root on the GPU machine (an H100), carry ["devrun/ml"]
# (devrun/ml: cuda.test.gz of 2f4965d and ref.txz, as run-split.sh says)
TESTS=TestOracleOnGPU MEASURE=TestMeasureRouter bash docs/bench/cuda/run-split.sh
