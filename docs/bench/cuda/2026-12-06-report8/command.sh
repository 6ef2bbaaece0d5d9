#!/bin/bash
# main at 63b5e69 (petal built from it; petal-prev from 43f4c98, gemm=wg's
# first tile choice, w128o and w64o; petal-old from 4f3d75a, the build of the
# 2026-12-03 H200 report); the machine was an H100 (env.txt).
# devrun/report/petals.txz as the script's header says.
bash docs/bench/cuda/run-report8.sh
# report.tgz: bench/results/2026-12-06-h100-cuda-3 (bench.json, bench.txt,
# env.txt, speed.svg) and progress.txt, steps.txt here; repeats.tgz unpacked
# here (repeats-*.txt/.json, short-*.txt/.json).
