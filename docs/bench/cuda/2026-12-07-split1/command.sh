#!/bin/bash
# From the repository root on the GPU machine (an H100 came), carry ["devrun/gl2"]
# (cuda.test and petal of 2b615da, -tags nofixture, and the oracle's reference;
# devrun/gl2/BUILT_FROM), the tree's logs and PTX left out of the call:
bash docs/bench/cuda/run-split1.sh   # -> env.txt, logs.tgz
