#!/bin/bash
# main at d9d446e (the pipelined and 256-row GEMM tiles, gdn_chunk_state_ilp, all written and off),
# devrun/gm built as run-stream.sh's header says (no petal-old: the specs compare options of one
# binary). An H100 (the call's card: NVIDIA H100 80GB HBM3, driver 580.159.04); 120 s.
PTXAS_RE='(gemm_(dense|gateup)_(m128|p128|p128s4|p64|p128w8|m128w8|m128n256|p128n256|m64)|gdn_chunk_state.*)' \
TESTS='TestRouter|TestGEMM|TestMoEGrouped|TestMoERoute|TestTensorCoreOps|TestParse|TestConformance|TestChunkedDelta|TestDeltaChunk' \
MEASURE='TestMeasureGEMM|TestMeasureRouter|TestMeasureDeltaForms' MAXCTX=20000 PROMPTS=512,1K,4K,16K \
SPECS='petal:cuda petal:cuda:gemmpipe=on petal:cuda:gemmn=256' bash docs/bench/cuda/run-stream.sh
# Tests: all 17 top-level tests pass (tests.txt.gz), among them TestGEMMDenseMatchesReference on
# every tile (the new ones within the same bars as m128: 5.3e-7 of sum|w·x|), TestGEMMGroupSplit-
# MatchesReference (splitk=all), TestRouterTensorCoresMatchReference with qgemm_f64_w, TestMoE-
# GroupedMatchesReference (every tile, s32 included) and TestChunkedDeltaRule* with both state kernels.
# Output (prompt length, s, prefill tok/s, % floor, ...; decode at 256: s, tok/s, ...):
# petal:cuda
#       256           -               -                 -             -              2.13         469.94            26.99             266
#       512       0.038         13529.5             21.88         21.82                 -              -                -               -
#        1K       0.053         19292.3             31.45         21.94                 -              -                -               -
#        4K       0.157         26098.9             44.71         22.38                 -              -                -               -
#       16K       0.707         23179.0             47.37         22.85                 -              -                -               -
# petal:cuda:gemmpipe=on
#       256           -               -                 -             -              2.09         477.88            27.43             266
#       512       0.038         13571.3             23.40         21.82                 -              -                -               -
#        1K       0.059         17497.2             30.43         21.94                 -              -                -               -
#        4K       0.161         25366.4             46.34         22.38                 -              -                -               -
#       16K       0.720         22751.7             49.60         22.85                 -              -                -               -
# petal:cuda:gemmn=256
#       256           -               -                 -             -              2.11         473.33            27.15             266
#       512       0.038         13407.5             23.84         21.82                 -              -                -               -
#        1K       0.056         18266.8             32.75         21.94                 -              -                -               -
#        4K       0.167         24504.2             46.16         22.38                 -              -                -               -
#       16K       0.746         21976.2             49.40         22.85                 -              -                -               -
