#!/bin/bash
# petal-old: 6a4e0d9; petal-k: 98da22d (the norms' write-back from what the kernel holds);
# petal-d: bb9a587 (and moe_down in blocks of 8 warps); petal-p: 9bc2dae (and the grouped mat-vecs' L2 requests
# for steps 2-3); petal: 81ecdf1 (and two groups a lane loaded at a time). cuda.test and the trace from 81ecdf1.
KTRACE=cuda RUNS="petal-old:cuda petal-k:cuda petal-d:cuda petal-p:cuda petal:cuda" ROUNDS=2 PHASES='TestMeasureDecodePhases' TESTS='TestQMV|TestFusedMatchReferences|TestNormGroupMatchesApart|TestNormRouteMatchesApart|TestMoEMatchesReference|TestRoute|TestConformance' bash docs/bench/cuda/run-qstage.sh
