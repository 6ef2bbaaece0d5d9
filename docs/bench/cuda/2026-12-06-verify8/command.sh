#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/ml"]
# (devrun/ml: cuda.test.gz of ed6cea6 and ref.txz, as run-split.sh says)
TTIME=240 MTIME=60 TESTS='TestOracleOnGPU|TestFlashAttnInBackend|TestConformance|TestKVToBF16' MEASURE=TestMeasureFlash bash docs/bench/cuda/run-split.sh
