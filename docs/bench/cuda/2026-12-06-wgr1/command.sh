#!/bin/bash
# from the repository root on the GPU machine (an H100), carry ["devrun/wr"]
# (devrun/wr built from 2f4965d as run-wgr.sh says)
bash docs/bench/cuda/run-wgr.sh
