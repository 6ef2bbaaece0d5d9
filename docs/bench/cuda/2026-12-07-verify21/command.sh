#!/bin/bash
# From the repository root on the GPU machine (an H100), carry ["devrun/v21"] (cuda.test of
# 74d8e9e, moeys=bf16 the default, and the oracle's reference), the tree's logs, PTX, cubins
# and tokenizer test data left out of the call:
TESTS='TestConformance|TestCubinsLoad|TestTensorCoreOpsMatchReferences' ORACLE_RUN='defaults|moeys=f32' \
  CARRY=devrun/v21 bash docs/bench/cuda/run-report18.sh
#   -> env-tests.txt, tests.txt (gzipped here), oracle.txt
