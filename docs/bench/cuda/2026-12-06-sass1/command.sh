#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/sx"]
# (devrun/sx: cuda.test.gz and petal.xz of d972944, as run-pipe.sh says); the cubins it made
# (sass.tgz) are engine/cuda/kernels/sass as committed
bash docs/bench/cuda/run-sass.sh
