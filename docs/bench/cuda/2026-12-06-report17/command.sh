#!/bin/bash
# From the repository root on the same warm H200 right after gnpre1, carry ["devrun/n9"]
# (petals.txz: petal of 9d57c8a, petal-old of dfa76fa, both -tags nofixture; devrun/n9/BUILT_FROM):
CARRY=devrun/n9 bash docs/bench/cuda/run-report16.sh   # -> env.txt, jit.txt, report.tgz, repeats.tgz, kv.tgz
# The report itself: bench/results/2026-12-06-h200-cuda-10 (report.tgz's rep/).
