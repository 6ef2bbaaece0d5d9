#!/bin/bash
# run-qkrows2.sh: qkrows=warp after qk_rows took lane 0's sum of squares
# in every lane (run-qkrows1.sh in next26 found the lanes' sums one unit in
# the last place apart): its cubin (sass.tgz), TestQKRowsMatchPrep and
# TestKVShadow (tests.txt), then prefill of 512 / 4K / 16K tokens under
# the defaults (GEMM_RA_STAGED_OUT=2's cubins built in) and qkrows=warp in
# ROUNDS (default 2) alternating rounds (rounds.tgz). From the repository
# root; $CARRY (default devrun/qk): cuda.test.xz and petals.txz (petal),
# both of this commit; the tree's qk_rows.ptx in the call. About 2 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/qk}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
rm -rf /tmp/s28 && cp -r engine/cuda/kernels/sass /tmp/s28
new_cubin /tmp/s28 qk_rows /tmp/s28
(cd /tmp && tar czf $O/sass.tgz s28/qk_rows.* s28/manifest.txt s28/ptxas-*.txt)
export PETAL_CUDA_SASS=/tmp/s28
cuda_tests /tmp/s28 $D/cuda.test 'TestQKRowsMatchPrep|TestKVShadow' $O/tests.txt
ROUNDS=${ROUNDS:-2} prefill_rounds $D/petal $O cuda cuda:qkrows=warp
(cd $O && tar czf rounds.tgz bench-* && rm -f bench-*)
echo "all: $(( $(date +%s) - start )) s"
