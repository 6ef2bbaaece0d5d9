#!/bin/bash
# From the repository root on the GPU machine (asked for an H100 or an H200; an H100 came),
# carry ["devrun/my"] (petal of 69dbd30, -tags nofixture; devrun/my/BUILT_FROM):
CARRY=devrun/my bash docs/bench/cuda/run-eager1.sh   # -> env.txt, logs.tgz
