#!/bin/bash
# main at 43f4c98 (petal built from it; petal-old from 4f3d75a, the build of
# the 2026-12-03 H200 report); the machine was an H100 (env.txt).
# devrun/report/petals.txz as the script's header says.
bash docs/bench/cuda/run-report7.sh
# The report's folder came back as report.tgz: bench/results/2026-12-06-h100-cuda-2
# (bench.json, bench.txt, env.txt, speed.svg) and progress.txt, steps.txt here;
# short.tgz unpacked here (short-petal*.txt, .json).
