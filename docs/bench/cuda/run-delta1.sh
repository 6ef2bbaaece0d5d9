#!/bin/bash
# run-delta1.sh: after gl2, on 50e6d9e's removal of the losing decode forms
# (every remaining PTX as verify17 and gl2 ran it, moe_route's cubin gone
# with its family), delta=tf32 (gdn_chunk_tf32.cu: the chunked delta
# rule's state pass with one tf32 product a pair of operands) and
# convdelta=on (gdn_chunk_conv.cu: the conv inside the rule's prep). ptxas
# makes the two families' cubins into a copy of the built-in ones (/tmp/s1,
# kept in sass.tgz); then TestCubinsLoad, conformance and the chunked delta
# rule's tests (delta=tf32's against the float64 reference, convdelta's
# against the two ops apart, among them) on those cubins, the oracle under
# the defaults, delta=tf32 and convdelta=on, TestMeasureDeltaForms,
# prefill of 4K and 16K tokens (three runs each, the median) and decode at
# 4K under the defaults, delta=tf32 and convdelta=on in two alternating
# rounds, and the defaults' --profile at 4K (where prefill's time goes
# now). From the repository root; $CARRY (default devrun/tf)
# holds petals.txz (petal, -tags nofixture), cuda.test.xz and ref.txz
# (devrun-pack.sh with TEST=HEAD, then tar cJf ref.txz -C
# ../shared/oracle reference); the tree may go without its logs and PTX
# but gdn_chunk_tf32.ptx and gdn_chunk_conv.ptx. About 6 minutes; SKIP_ORACLE=1, SKIP_MEASURE=1,
# TESTS (a -test.run pattern) and ROUNDS shorten it.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/tf}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
for fam in gdn_chunk_tf32 gdn_chunk_conv; do
  P=engine/cuda/kernels/$fam.ptx
  /usr/local/cuda/bin/ptxas -arch=sm_90 -O3 -v $P -o /tmp/s1/$fam.sm_90.cubin > $O/ptxas-$fam.txt 2>&1 &&
    gzip -9 -n -f /tmp/s1/$fam.sm_90.cubin &&
    echo "$fam sm_90 $(sha256sum $P | cut -d' ' -f1) $(/usr/local/cuda/bin/ptxas --version | grep -oE 'V[0-9.]+' | head -1)" >> /tmp/s1/manifest.txt
  echo "$fam cubin: rc=$?; $(grep -E 'registers|spill' $O/ptxas-$fam.txt | tr '\n' ' ' | cut -c1-400)"
done
(cd /tmp && tar czf $O/sass.tgz s1/gdn_chunk_tf32.sm_90.cubin.gz s1/gdn_chunk_conv.sm_90.cubin.gz s1/manifest.txt)
# (cuda_tests with a longer limit: the float64 references of 4096 tokens take seconds each)
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 timeout 240 $D/cuda.test -test.v \
  -test.run "${TESTS:-TestCubinsLoad|TestConformance|TestDeltaChunkKernelMatchesLauncher|TestChunkedDelta|TestConvDeltaMatchesApart}" > $O/tests.txt 2>&1)
echo "tests: rc=$?"; grep -E '^(--- FAIL|FAIL|ok|PASS)|panic' $O/tests.txt | head -12
echo "top-level: $(grep -c '^--- PASS' $O/tests.txt) passed, $(grep -c '^--- FAIL' $O/tests.txt) failed"
awk '/=== RUN/{n=$3} /of the RMS/ && n ~ /(TF32|LongPrefill)/ {print n": "$2" "$3" "$4}' $O/tests.txt | tail -24
grep -E -- '--- (PASS|FAIL): TestConvDelta|fused, .* apart' $O/tests.txt | head -12
if [ -z "${SKIP_ORACLE:-}" ]; then
  (cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 120 $D/cuda.test -test.v \
    -test.run 'TestOracleOnGPU/(defaults|delta=tf32|convdelta=on)$' > $O/oracle.txt 2>&1)
  echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -12; grep -E 'top-1' $O/oracle.txt | head -10
fi
if [ -z "${SKIP_MEASURE:-}" ]; then
  (cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_BENCH=1 timeout 120 $D/cuda.test -test.v -test.run 'TestMeasureDeltaForms$' > $O/measure.txt 2>&1)
  echo "measure: rc=$?"; grep -E 'delta rule|FAIL' $O/measure.txt
fi
echo "tests: $(( $(date +%s) - start )) s"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for be in cuda cuda:delta=tf32 cuda:convdelta=on; do
    PETAL_CUDA_SASS=/tmp/s1 BENCH_LIMIT=80 bench_run $D/petal $O "$round-$(tag_of $be)" $be --max-context 17000 \
      --prompt-lengths 4K,16K --context-lengths 4K --decode-tokens 32 --repeats 3 --floors=false
  done
done
PETAL_CUDA_SASS=/tmp/s1 timeout 120 $D/petal bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 5000 \
  --prompt-lengths 4K --context-lengths 4K --decode-tokens 16 --profile > $O/profile.txt 2>&1
echo "profile: rc=$?"; grep -A16 "^profile at" $O/profile.txt | cut -c1-80 | head -40
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
