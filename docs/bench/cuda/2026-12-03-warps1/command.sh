#!/bin/bash
# petal-old: bf902e7 (8 warps a block); petal: the same with QMV_WARPS and MOE_UP_WARPS 16
# (launch bounds of one block a multiprocessor), not committed.
KTRACE=none RUNS="petal-old:cuda petal:cuda" ROUNDS=2 TESTS='TestMoELayer|TestMoEMatchesReference|TestNormGroupMatchesApart|TestFusedMatchReferences|TestConformance|TestQMV' bash docs/bench/cuda/run-qstage.sh
timeout 60 devrun/ml/petal bench --backend cuda:moelayer=one --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths 512 --context-lengths 256,4K,16K --decode-tokens 64 --repeats 3
