#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/kt"]
# (devrun/kt/petal.xz: petal of 4b025cf, as run-ktrace.sh says)
bash docs/bench/cuda/run-profile2.sh
