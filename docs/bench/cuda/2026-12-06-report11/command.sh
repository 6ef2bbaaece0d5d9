#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/report3"]
# (devrun/report3/petals.txz: petal of 6d9b0ac and petal-old of 4f3d75a, as run-report11.sh says)
bash docs/bench/cuda/run-report11.sh
