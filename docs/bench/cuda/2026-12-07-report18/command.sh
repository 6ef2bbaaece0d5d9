#!/bin/bash
# From the repository root on the GPU machine (asked for an H100 or an H200; an H100 came),
# two calls on the same warm machine, since together their files pass a call's 64 MiB:
# carry ["devrun/rt"] (cuda.test of 63c7bd1 and the oracle's reference), then
# carry ["devrun/rr"] (petals.txz: petal of 63c7bd1, petal-old of dfa76fa, both -tags nofixture),
# the tree's logs, PTX, cubins and tokenizer test data left out of both calls:
CARRY=devrun/rt bash docs/bench/cuda/run-report18.sh   # -> env-tests.txt, tests.txt, oracle.txt (in tests.tgz)
CARRY=devrun/rr bash docs/bench/cuda/run-report18.sh   # -> env.txt, jit.txt, report.tgz, repeats.tgz, kv.tgz
# The report itself: bench/results/2026-12-07-h100-cuda-11 (report.tgz's rep/).
