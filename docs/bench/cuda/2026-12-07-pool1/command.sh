#!/bin/bash
# From the repository root on the GPU machine (asked for an H100 or an H200; an H100 came),
# carry ["devrun/po"] (cuda.test and petal of fb79eab, -tags nofixture, and the oracle's
# reference; devrun/po/BUILT_FROM), the tree's logs, PTX, cubins and tokenizer test data left out:
CARRY=devrun/po bash docs/bench/cuda/run-pool1.sh   # -> env.txt, logs.tgz
