#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/s2"]
# (devrun/s2: cuda.test.xz and petal.xz (-tags nofixture) of 9634714)
bash docs/bench/cuda/run-router6.sh
