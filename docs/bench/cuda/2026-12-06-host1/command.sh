#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/nx"]
# (devrun/nx: cuda.test.gz and petal.xz of 6d9b0ac, as run-pipe.sh says)
bash docs/bench/cuda/run-host1.sh
