#!/bin/bash
# From the repository root on the GPU machine (an H100), carry ["devrun/nb"] (cuda.test and
# petal of 121e42a, -tags nofixture, and the oracle's reference; devrun/nb/BUILT_FROM), the tree's
# logs and PTX left out of the call but norm_bf.ptx and gemm_downbf.ptx:
CARRY=devrun/nb bash docs/bench/cuda/run-normbf1.sh
#   -> env.txt, logs.tgz, sass.tgz (its norm_bf and gemm_downbf cubins committed in
#      engine/cuda/kernels/sass)
