#!/bin/bash
# from the repository root on the GPU machine (an H100), carry ["devrun/nx"]
# (devrun/nx: petal.xz of the commit that made gemm=wgrp and attn=wgp the default, built before
# it was committed; the chunk default was still 4096, each run names --chunk)
bash docs/bench/cuda/run-defaults.sh
