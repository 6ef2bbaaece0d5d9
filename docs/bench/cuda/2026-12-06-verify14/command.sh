#!/bin/bash
# From the repository root on the GPU machine (an H100 came), carry ["devrun/vd"].
# 1: cuda.test and petal of 3185e18 (kvshadow=on the default):
LIMIT=200 bash docs/bench/cuda/run-verify14.sh            # -> verify-1.tgz
# 2 and 3, on the same warm machine: cuda.test of the fix (TestFusedMatchReferences
# expecting qk_prep_f32_shadow for an f32 cache under the default), petal as in 1:
TESTS='TestFusedMatchReferences|TestKVShadow|TestFlashAttnInBackend' LIMIT=120 bash docs/bench/cuda/run-verify14.sh   # -> verify-2.tgz
TESTS=Test LIMIT=190 bash docs/bench/cuda/run-verify14.sh   # -> verify-3.tgz (stopped at 190 s, in its 19th test)
