#!/bin/bash
# main at 5bb9c26 (its kernels those of 8f8a9f3)
bash docs/bench/cuda/run-verify3.sh
