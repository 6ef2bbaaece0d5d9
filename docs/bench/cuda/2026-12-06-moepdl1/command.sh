#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/ab"]
# (devrun/ab/petals.txz: petal of the commit making w128rp start at 57 rows an expert, built before it was
# committed, and petal-prev of f3ab956)
bash docs/bench/cuda/run-moe-pdl.sh
