#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/sp"]
# (devrun/sp/petal.xz: petal of the commit adding bench's sampling flags, 5d870ed)
ROUNDS=1 bash docs/bench/cuda/run-sampled.sh
