#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/nx"]
# (devrun/nx: cuda.test.gz of 9001bdc with qgemm_f64_h added, as run-router5.sh says)
bash docs/bench/cuda/run-router5.sh
