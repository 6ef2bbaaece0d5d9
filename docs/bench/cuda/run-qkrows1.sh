#!/bin/bash
# run-qkrows1.sh: qkrows=warp (qk_rows.cu: a prompt chunk's query and key
# preparation a warp a row over every head, the f32 cache's shadow rows
# from the same registers) on its first run: its cubin made first
# (sass.tgz), TestQKRowsMatchPrep on it (the bits of qkrows=block, f32
# caches with and without their shadow and bf16 ones; tests.txt), then
# prefill of 512 / 4K / 16K tokens under the defaults and qkrows=warp in
# ROUNDS (default 2) alternating rounds (rounds.tgz) and `petal bench
# --profile` at 4K under qkrows=warp (profile.txt: attn.qk_prep's share,
# 1.7 % under the defaults in router7's). From the repository root;
# $CARRY (default devrun/ep): cuda.test.xz and petals.txz (petal) of main;
# the tree's qk_rows.ptx in the call. About 1.5 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/ep}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
rm -rf /tmp/s25 && cp -r engine/cuda/kernels/sass /tmp/s25
new_cubin /tmp/s25 qk_rows /tmp/s25
(cd /tmp && tar czf $O/sass.tgz s25/qk_rows.* s25/manifest.txt s25/ptxas-*.txt)
export PETAL_CUDA_SASS=/tmp/s25
cuda_tests /tmp/s25 $D/cuda.test 'TestQKRowsMatchPrep|TestKVShadow' $O/tests.txt
ROUNDS=${ROUNDS:-2} prefill_rounds $D/petal $O cuda cuda:qkrows=warp
(cd $O && tar czf rounds.tgz bench-* && rm -f bench-*)
timeout 60 $D/petal bench --backend cuda:qkrows=warp --synthetic qwen3.6-35b-a3b --max-context 5000 \
  --prompt-lengths 4K --context-lengths 4K --decode-tokens 16 --profile > $O/profile.txt 2>&1
echo "profile: rc=$?"; grep -A10 "^profile at 4K" $O/profile.txt | grep -E 'qk_prep|all' | cut -c1-110
echo "all: $(( $(date +%s) - start )) s"
