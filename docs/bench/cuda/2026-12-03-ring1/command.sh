#!/bin/bash
# petal-old: dc23502; petal-a: 7595865 (qstage's layout without conversions, the grouped table by value);
# petal: 585ef79 (the weights through a cp.async ring in shared memory, reverted after this run). cuda.test from 585ef79.
KTRACE=none RUNS="petal-old:cuda petal-a:cuda petal:cuda" ROUNDS=2 PHASES='TestMeasureDecodePhases' TESTS='TestQMV|TestFusedMatchReferences|TestNormGroupMatchesApart|TestNormRouteMatchesApart|TestMoEMatchesReference|TestConformance' bash docs/bench/cuda/run-qstage.sh
