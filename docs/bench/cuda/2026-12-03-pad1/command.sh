#!/bin/bash
# petal-old: e54f451 (main); petal-r: 1792682 (route-pad.patch); petal-g: e54f451 with gdn-preload.patch;
# petal: f06de81 (both). cuda.test built from f06de81.
KTRACE=none RUNS="petal-old:cuda petal-r:cuda petal-g:cuda petal:cuda" ROUNDS=2 PHASES='TestMeasureDecodePhases|TestMeasureMoELayerPhases' TESTS='TestRoute|TestNormRouteMatchesApart|TestFusedMatchReferences|TestMoELayer|TestMoEMatchesReference|TestConformance|TestGDN' bash docs/bench/cuda/run-qstage.sh
