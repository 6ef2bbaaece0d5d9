#!/bin/bash
# petal-old: 8f8a9f3; petal-q: 2aea4b4 (qmv's steps loaded one ahead); petal: a0471f6 (moe_gate_up's too).
KTRACE=none RUNS="petal-old:cuda petal-q:cuda petal:cuda" ROUNDS=2 TESTS='TestMoELayer|TestMoEMatchesReference|TestNormGroupMatchesApart|TestNormRouteMatchesApart|TestFusedMatchReferences|TestConformance|TestQMV' bash docs/bench/cuda/run-qstage.sh
