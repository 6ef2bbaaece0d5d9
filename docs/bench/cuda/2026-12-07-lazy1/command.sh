#!/bin/bash
# From the repository root on the GPU machine (asked for an H100 or an H200; an H100 came),
# carry ["devrun/pp2"] (petal of 730ba8d, -tags nofixture):
CARRY=devrun/pp2 bash docs/bench/cuda/run-lazy1.sh   # -> env.txt, logs.tgz
