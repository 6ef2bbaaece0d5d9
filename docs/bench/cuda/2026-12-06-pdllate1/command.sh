#!/bin/bash
# From the repository root on the GPU machine (an H100 came), carry ["devrun/pl"]
# (cuda.test and petal of 1988278 + the ktrace lines of the next commit, petal-main of c8c01a2; -tags nofixture):
bash docs/bench/cuda/run-pdllate1.sh     # -> env.txt, logs.tgz (tests, benches, kernel traces, sass.txt)
# (sass.tgz, the cubins of 1988278's PTX, came back too and is not kept: that PTX is gone.)
