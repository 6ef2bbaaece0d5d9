#!/bin/bash
# from the repository root on the GPU machine (an H100), carry ["devrun/fw"]
# (devrun/fw built from 9b14687 as run-flashwg.sh says)
bash docs/bench/cuda/run-flashwg.sh
