#!/bin/bash
# main at 15e8217 (kernels of 8367201 plus the router's split), devrun/gm built as run-stream.sh's header says
# (petal-old from 4f3d75a). H200. The tests' log did not come back (the script's redirection sat inside a
# parameter expansion; fixed since) and the five benches wrote one file (the tr range; fixed since), so
# their tables are the call's output below, as printed by the script.
TESTS='TestGEMM|TestMoEGrouped|TestMoERoute|TestRouter|TestTensorCoreOpsMatchReferences|TestConformance|TestFlash|TestParse' \
MEASURE='TestMeasureGEMM|TestMeasureFlash|TestMeasureRouter' MAXCTX=40000 PROMPTS=512,1K,4K,32K \
SPECS="petal-old:cuda petal:cuda petal:cuda:linears=group petal:cuda:moe=stream,linears=group petal:cuda:moe=stream,linears=group,attn=wide" \
bash docs/bench/cuda/run-stream.sh
# Output (prompt length, s, prefill tok/s, % floor, ...; decode at 256: s, tok/s, ...):
# petal-old:cuda
#       256           -               -                 -             -              2.03         491.67            19.29             266
#       512       0.042         12188.4             19.50         21.82                 -              -                -               -
#        1K       0.058         17592.9             28.39         21.94                 -              -                -               -
#        4K       0.158         25973.2             44.03         22.38                 -              -                -               -
#       32K       1.791         18293.4             44.99         23.47                 -              -                -               -
# petal:cuda  (HEAD: the router split 4 ways at 512 tokens)
#       256           -               -                 -             -              2.04         491.07            19.38             266
#       512       0.040         12708.6             20.35         21.82                 -              -                -               -
#        1K       0.059         17472.2             28.20         21.94                 -              -                -               -
#        4K       0.157         26171.1             44.38         22.38                 -              -                -               -
#       32K       1.780         18407.7             45.29         23.47                 -              -                -               -
# petal:cuda:linears=group
#       256           -               -                 -             -              2.03         491.41            19.36             266
#       512       0.039         13037.1             20.87         21.82                 -              -                -               -
#        1K       0.056         18337.5             29.60         21.94                 -              -                -               -
#        4K       0.153         26799.3             45.44         22.38                 -              -                -               -
#       32K       1.759         18632.4             45.84         23.47                 -              -                -               -
# petal:cuda:moe=stream,linears=group
#       256           -               -                 -             -              2.04         489.06            19.28             266
#       512       0.039         13131.5             21.03         21.82                 -              -                -               -
#        1K       0.060         16947.7             27.36         21.94                 -              -                -               -
#        4K       0.154         26574.4             45.08         22.38                 -              -                -               -
#       32K       1.759         18633.0             45.85         23.47                 -              -                -               -
# petal:cuda:moe=stream,linears=group,attn=wide
#       256           -               -                 -             -              2.04         490.46            19.28             266
#       512       0.039         13253.3             21.21         21.82                 -              -                -               -
#        1K       0.060         17169.7             27.71         21.94                 -              -                -               -
#        4K       0.152         26989.5             45.76         22.38                 -              -                -               -
#       32K       1.624         20180.1             49.64         23.47                 -              -                -               -
