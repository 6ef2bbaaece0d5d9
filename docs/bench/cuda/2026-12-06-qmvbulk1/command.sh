#!/bin/bash
# from the repository root on the GPU machine (an H100 came), carry ["devrun/rp"]
# (devrun/rp: cuda.test.xz and petal.xz (-tags nofixture) of 4acb98d)
bash docs/bench/cuda/run-qmvbulk1.sh
