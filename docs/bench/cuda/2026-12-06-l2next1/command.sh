#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/l2"]
# (devrun/l2: cuda.test.xz and petal.xz of 267f35b, as run-pipe.sh says)
bash docs/bench/cuda/run-l2next.sh
