#!/bin/bash
# from the repository root on the GPU machine (an H100), carry ["devrun/kc"]
# (devrun/kc built from 7c0af06 as run-kvcopy.sh says)
bash docs/bench/cuda/run-kvcopy.sh
