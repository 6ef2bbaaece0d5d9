#!/bin/bash
# run-kvshadow1.sh: kvshadow=on (shadow.go, attn_shadow.cu: a bf16 shadow
# of each f32 KV cache that decode's attention and prefill's flash
# attention read; written, not yet run): ptxas -v, TestKVShadow, the
# entry-point tests and conformance under kvshadow=on, then decode at 4K,
# 32K and 128K and prefill of 16K under the defaults and kvshadow=on in
# two rounds (the second at 128K only). From the repository root;
# devrun/ks holds cuda.test.xz and petal.xz (-tags nofixture). Everything
# packed in $OUT/shadow.tgz.
R=$(pwd); O=${OUT:-/tmp/out}/shadow; D=$R/devrun/ks; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda/kernels
PATH=$PATH:/usr/local/cuda/bin
ptxas -arch=sm_90 -O3 -v attn_shadow.ptx -o /tmp/attn_shadow.cubin > $O/ptxas.txt 2>&1; echo "ptxas: rc=$?"; grep -E 'error|entry|Used|spill' $O/ptxas.txt | head -8
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run 'TestKVShadow|TestConformance/(kvshadow|default)|TestFusedMatchReferences' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | grep -v 'PASS: Test[A-Za-z]*/' | head -12
grep -E -- '--- FAIL|shadow|attention:|kernels \[' $O/tests.txt | head -16
cd $R
for be in cuda cuda:kvshadow=on; do
  BENCH_LIMIT=150 bench_run "$D/petal" "$O" "1-$(tag_of $be)" $be --max-context 132000 --prompt-lengths 16K \
    --context-lengths 4K,32K,128K --decode-tokens 64 --floors=false
done
for be in cuda:kvshadow=on cuda; do
  BENCH_LIMIT=120 bench_run "$D/petal" "$O" "2-$(tag_of $be)" $be --max-context 132000 --prompt-lengths 512 \
    --context-lengths 128K --decode-tokens 64 --floors=false
done
(cd ${OUT:-/tmp/out} && tar czf shadow.tgz shadow && rm -rf shadow)
