#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, an H200 was lent), carry ["devrun/report3"]
# (devrun/report3/petals.txz: petal of dfa76fa and petal-old of 4f3d75a, as run-report12.sh says)
bash docs/bench/cuda/run-report12.sh
