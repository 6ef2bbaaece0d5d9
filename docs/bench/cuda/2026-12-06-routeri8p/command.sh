#!/bin/bash
# from the repository root on the GPU machine (an H100 came, the same as 2026-12-06-qmvbulk1's, right after it), carry ["devrun/rp"]
# (devrun/rp: cuda.test.xz and petal.xz (-tags nofixture) of 4acb98d)
bash docs/bench/cuda/run-routeri8p.sh
