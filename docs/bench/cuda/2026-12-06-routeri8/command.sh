#!/bin/bash
# from the repository root on the GPU machine (an H100 came), carry ["devrun/ri"]
# (devrun/ri: cuda.test.xz and petal.xz (-tags nofixture) of 86728a0)
bash docs/bench/cuda/run-routeri8.sh
