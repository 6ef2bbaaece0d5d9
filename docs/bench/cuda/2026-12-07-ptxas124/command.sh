#!/bin/bash
# On the development machine (no GPU), from the repository root at the commit that added this
# directory, with CUDA 12.4's ptxas extracted from Debian trixie's nvidia-cuda-toolkit
# (engine/cuda/kernels/regs.sh says how) and clang-19:
PTXAS=/tmp/ctk12/usr/bin/ptxas OUT=/tmp/ptxas124 bash docs/bench/cuda/run-ptxas124.sh
#   -> logs.tgz (all of OUT), summary.txt and loops.txt
