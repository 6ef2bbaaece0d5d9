#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/ab"]
# (devrun/ab/petals.txz: petal of the commit making qgemm_f64_h the router kernel, built before it was
# committed, and petal-prev of 9001bdc)
bash docs/bench/cuda/run-router-bench.sh
