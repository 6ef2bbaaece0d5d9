#!/bin/bash
# run-next26.sh: run-epi1.sh, run-qkrows1.sh and run-wide1.sh in one call
# (one machine start for all), each in its own folder, tarred into $OUT as
# epi1.tgz, qkrows1.tgz and wide1.tgz; ROUNDS (default 2) for each, wide1's ncu only while the
# call is under about 8 minutes. Carry devrun/ep (run-epi1.sh's header says
# how it is built; its petal and cuda.test, of main, serve run-wide1.sh
# too); the tree's logs, results,
# tokenizer test data and PTX but the gemm families' (gemm_fit4.ptx among
# them), qk_rows.ptx and route_i8.ptx left out of the call. First
# route_i8's cubin, stale since qgemm_i8 became route_i8.cu's qi_gemm
# instance (route_i8.tgz). About 8 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
rm -rf /tmp/s26 && cp -r engine/cuda/kernels/sass /tmp/s26 && new_cubin /tmp/s26 route_i8 /tmp/s26
(cd /tmp && tar czf "$O/route_i8.tgz" s26/route_i8.* s26/manifest.txt s26/ptxas-route_i8.txt)
rm -rf /tmp/o-epi /tmp/o-wide
OUT=/tmp/o-epi ROUNDS=${ROUNDS:-2} bash docs/bench/cuda/run-epi1.sh
(cd /tmp && tar czf "$O/epi1.tgz" o-epi)
echo "epi1: $(( $(date +%s) - start )) s"
rm -rf /tmp/o-qk && OUT=/tmp/o-qk ROUNDS=${ROUNDS:-2} bash docs/bench/cuda/run-qkrows1.sh
(cd /tmp && tar czf "$O/qkrows1.tgz" o-qk)
echo "qkrows1: $(( $(date +%s) - start )) s"
CARRY=devrun/ep OUT=/tmp/o-wide ROUNDS=${ROUNDS:-2} NCU_BEFORE=$(( 460 - ($(date +%s) - start) )) bash docs/bench/cuda/run-wide1.sh
(cd /tmp && tar czf "$O/wide1.tgz" o-wide)
echo "all: $(( $(date +%s) - start )) s"
