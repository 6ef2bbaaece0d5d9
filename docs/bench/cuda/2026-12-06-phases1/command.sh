#!/bin/bash
# From the repository root on the GPU machine (an H100 came), carry ["devrun/vd"]
# (cuda.test and petal of 7461f8c, -tags nofixture); one call, with verify15's line after it:
bash docs/bench/cuda/run-phases1.sh      # -> phases.txt, env.txt
