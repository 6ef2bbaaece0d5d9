#!/bin/bash
# From the repository root on the GPU machine (asked for an H100 or an H200; an H100 came),
# carry ["devrun/my"] (cuda.test and petal of 69dbd30, -tags nofixture, and the oracle's
# reference; devrun/my/BUILT_FROM), the tree's logs, PTX and tokenizer test data left out
# of the call but gemm_downbf.ptx:
CARRY=devrun/my bash docs/bench/cuda/run-moeys1.sh   # -> env.txt, logs.tgz, sass.tgz
