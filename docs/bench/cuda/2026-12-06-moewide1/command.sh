#!/bin/bash
# from the repository root on the GPU machine (asked for an H200, ran on an H100), carry ["devrun/s4"]
# (devrun/s4: cuda.test.xz and petal.xz (-tags nofixture) of the commit adding moewide)
bash docs/bench/cuda/run-moewide.sh
