#!/bin/bash
# from the repository root on the GPU machine (an H100), carry ["devrun/nx"]
# (devrun/nx: cuda.test.gz and petal.xz of 27d3221, as run-pipe.sh says)
bash docs/bench/cuda/run-pipe.sh
