#!/bin/bash
# from the repository root on the GPU machine (an H100), carry ["devrun/report2"]
# (devrun/report2/petal.xz: go build of ed6cea6, as run-report9.sh says)
bash docs/bench/cuda/run-report9.sh
