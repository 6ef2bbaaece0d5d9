#!/bin/bash
# run-wide1.sh: moefit=wide (gemm_fit4.cu's w160r4: w160rw's MoE tiles 256
# weight rows deep in four warpgroups, one block a multiprocessor, seven
# stages) on its first run: its cubin made first (sass.tgz), then on it
# the MoE tests (TestMoEGroupedMatchesReference takes w160r4 beside the
# others at 2048 and 4096 tokens, its outputs poisoned first; tests.txt), TestMeasureGEMM (gemm.txt: w160r4 against w160rw at 2048,
# 4096 and 16384 tokens), prefill of 512 / 4K / 16K tokens under the
# defaults and moefit=wide in ROUNDS (default 3) alternating rounds
# (rounds.tgz), then, while the call has time, ncu's stall reasons of
# gate/up on w160rw and w160r4 at 4096 tokens (ncu.tgz).
# From the repository root; $CARRY (default devrun/wd): cuda.test.xz and
# petals.txz (petal) of main:
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/wd petal=HEAD
# the tree's logs, results, tokenizer test data and PTX but gemm_fit4.ptx
# left out of the call. About 5 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/wd}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
rm -rf /tmp/s24 && cp -r engine/cuda/kernels/sass /tmp/s24
new_cubin /tmp/s24 gemm_fit4 /tmp/s24
(cd /tmp && tar czf $O/sass.tgz s24/gemm_fit4.* s24/manifest.txt s24/ptxas-*.txt)
export PETAL_CUDA_SASS=/tmp/s24
cuda_tests /tmp/s24 $D/cuda.test 'TestMoEGroupedMatchesReference|TestGEMMWGModule|TestCubinsLoad' $O/tests.txt
(cd engine/cuda && PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 150 $D/cuda.test -test.v \
  -test.run '^TestMeasureGEMM$' > $O/gemm.txt 2>&1)
echo "TestMeasureGEMM: rc=$?"; grep -E 'moe T=(2048|4096|16384) .*(w160rw|w160r4|w128rp) ' $O/gemm.txt | sed 's/.*moe T/moe T/' | cut -c1-230
echo "tests: $(( $(date +%s) - start )) s"
ROUNDS=${ROUNDS:-3} prefill_rounds $D/petal $O cuda cuda:moefit=wide
(cd $O && tar czf rounds.tgz bench-* && rm -f bench-*)
echo "rounds: $(( $(date +%s) - start )) s"
if [ $(( $(date +%s) - start )) -lt ${NCU_BEFORE:-330} ]; then
  # TestMeasureGEMM's launches of a tile's gate/up: 46 a length, 512 / 1K / 2K first
  NCU="gemm_gateup_w160rw:140:TestMeasureGEMM gemm_gateup_w160r4:140:TestMeasureGEMM" STALLS=1 NTIME=60 \
    CARRY=${CARRY:-devrun/wd} bash docs/bench/cuda/run-ncu2.sh 2>&1 | grep -v '^unpack' | head -50
fi
echo "all: $(( $(date +%s) - start )) s"
