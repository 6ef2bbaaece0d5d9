#!/bin/bash
# From the repository root on the GPU machine (asked for an H100 or an H200; an H100 came),
# carry ["devrun/r20b"] (petals.txz: petal of 4d7cffd, petal-old of e24a241, the twelfth
# report's build, both -tags nofixture), the tree's logs, PTX, cubins and tokenizer test data
# left out of the call (the binaries embed their cubins):
ABLATE=moeys=bf16,normbf=off,moegroup=one ABLATE_REPEATS=2 KV_BACKENDS=cuda CARRY=devrun/r20b \
  bash docs/bench/cuda/run-report18.sh
#   -> env.txt, jit.txt, report.tgz, repeats.tgz, kv.tgz
# The report itself: bench/results/2026-12-07-h100-cuda-13 (report.tgz's rep/).
