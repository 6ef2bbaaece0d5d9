#!/bin/bash
# From the repository root on the GPU machine (asked for an H100 or an H200; an H100 came),
# two calls on the same warm machine, since together their files pass a call's 64 MiB:
# carry ["devrun/rt2"] (cuda.test of e24a241 and the oracle's reference), then
# carry ["devrun/rr2"] (petals.txz: petal of e24a241, petal-old of dfa76fa, both -tags nofixture),
# the tree's logs, PTX, cubins and tokenizer test data left out of both calls:
TESTS='TestConformance|TestGraphOnlyShortChunks|TestGraphOutlivesBackend|TestChunkRows|TestSnapshotRoundTripOnGPU|TestCubinsLoad|TestTensorCoreOpsMatchReferences' \
  ORACLE_RUN='defaults|moeys=bf16' CARRY=devrun/rt2 bash docs/bench/cuda/run-report18.sh   # -> tests.tgz
ABLATE=delta=chunked,moeys=bf16,graphs=off CARRY=devrun/rr2 bash docs/bench/cuda/run-report18.sh
#   -> env.txt, jit.txt, report.tgz, repeats.tgz, kv.tgz
# The report itself: bench/results/2026-12-07-h100-cuda-12 (report.tgz's rep/).
