#!/bin/bash
# From the repository root on the GPU machine (asked for an H100 or an H200; an H100 came),
# carry ["devrun/pp2"] (petal of 730ba8d, pool=on the default, -tags nofixture):
CARRY=devrun/pp2 bash docs/bench/cuda/run-prep1.sh   # -> env.txt, logs.tgz (cpu.prof: go tool pprof -focus=Model..Prepare)
