#!/bin/bash
# from the repository root on the GPU machine (an H100), carry ["devrun/ml"]
# (devrun/ml: cuda.test.gz of the commit that made gemm=wgrp and attn=wgp the default, built
# before it was committed, and ref.txz, as run-split.sh says)
TESTS='TestOracleOnGPU|TestConformance|TestGEMMTilesFit|TestGEMMWGModule' MEASURE='TestMeasureRouter' MTIME=60 bash docs/bench/cuda/run-split.sh
