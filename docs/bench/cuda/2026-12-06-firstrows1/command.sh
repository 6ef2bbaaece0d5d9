#!/bin/bash
# from the repository root on the GPU machine (an H100), carry ["devrun/s5"]
# (devrun/s5: cuda.test.xz and petal.xz (-tags nofixture) of 4a1557b, petal-old.xz of 0699a92, the commit before it)
bash docs/bench/cuda/run-firstrows.sh
