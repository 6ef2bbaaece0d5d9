#!/bin/bash
# The working tree of the commit that adds gdn_chunk_state_sk, with it the
# default (deltaStateKernel), devrun/ml holding cuda.test.gz and ref.txz as
# run-split.sh's header says. An H100; 67 s.
TESTS='TestChunkedDelta|TestOracleOnGPU|TestConformance' MEASURE='TestMeasureDeltaForms' TTIME=240 \
  bash docs/bench/cuda/run-split.sh
