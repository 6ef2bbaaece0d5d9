#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/s3"]
# (devrun/s3: cuda.test.xz and petal.xz (-tags nofixture) of the commit adding moetail)
bash docs/bench/cuda/run-moetail.sh
