#!/bin/bash
# From the repository root on the GPU machine (an H100), carry ["devrun/gr"] (cuda.test and
# petal of 0d4438c, -tags nofixture, and the oracle's reference; devrun/gr/BUILT_FROM), the tree's
# logs and PTX left out of the call but moe_group.ptx:
SKIP_MEASURE=1 TESTS='TestMoERouteGroups|TestTensorCoreOpsMatchReferences' CARRY=devrun/gr bash docs/bench/cuda/run-group1.sh
#   -> env.txt, logs.tgz, sass.tgz (its moe_group cubin committed as engine/cuda/kernels/sass/moe_group.sm_90.cubin.gz)
