#!/bin/bash
# From the repository root on the GPU machine (asked for an H100 or an H200; an H100 came),
# carry ["devrun/pp"] (petal of 3b856e5, -tags nofixture):
CARRY=devrun/pp bash docs/bench/cuda/run-prep1.sh   # -> env.txt, logs.tgz (cpu.prof: go tool pprof -focus=Model..Prepare)
