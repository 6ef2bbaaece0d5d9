#!/bin/bash
# run-next26.sh: run-epi1.sh then run-wide1.sh in one call (one machine
# start for both), each in its own folder, tarred into $OUT as epi1.tgz
# and wide1.tgz; ROUNDS (default 2) for both, wide1's ncu only while the
# call is under about 8 minutes. Carry devrun/ep (run-epi1.sh's header says
# how it is built; its petal and cuda.test, of main, serve run-wide1.sh
# too); the tree's logs, results,
# tokenizer test data and PTX but the gemm families' (gemm_fit4.ptx among
# them) left out of the call. About 7 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"
start=$(date +%s)
rm -rf /tmp/o-epi /tmp/o-wide
OUT=/tmp/o-epi ROUNDS=${ROUNDS:-2} bash docs/bench/cuda/run-epi1.sh
(cd /tmp && tar czf "$O/epi1.tgz" o-epi)
echo "epi1: $(( $(date +%s) - start )) s"
CARRY=devrun/ep OUT=/tmp/o-wide ROUNDS=${ROUNDS:-2} NCU_BEFORE=$(( 480 - ($(date +%s) - start) - 150 )) bash docs/bench/cuda/run-wide1.sh
(cd /tmp && tar czf "$O/wide1.tgz" o-wide)
echo "all: $(( $(date +%s) - start )) s"
