#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, an H200 was lent), carry ["devrun/nx"]
# (devrun/nx: cuda.test.gz and petal.xz of dfa76fa, as run-pipe.sh says)
bash docs/bench/cuda/run-narrow.sh
