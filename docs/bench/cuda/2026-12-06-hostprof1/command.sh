#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/report3"]
# (devrun/report3/petals.txz: petal of f3ab956 and petal-old, as run-report12.sh says)
bash docs/bench/cuda/run-hostprof.sh
