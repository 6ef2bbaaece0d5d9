#!/bin/bash
# run-walk2.sh: deltawalk=two (gdn_chunk_walk2.cu: the chunked delta rule's
# state pass at 16 rows of a value head's state a block of four warps, one
# workspace buffer, two blocks a multiprocessor). ptxas makes its cubin into
# a copy of the built-in ones (/tmp/s1, kept in sass.tgz); then its tests
# (against the float64 reference, 16 to 4096 tokens, graphs on and off)
# and TestCubinsLoad on those cubins, the oracle under deltawalk=two,
# TestMeasureDeltaForms, and prefill of 4K and 16K tokens (three runs each,
# the median) under the defaults, deltawalk=two, delta=tf32 and both
# (gdn_chunk_walk2_tf32.cu, whose cubin it makes too) in two
# alternating rounds. From the repository root; $CARRY (default devrun/w2)
# holds petals.txz (petal, -tags nofixture), cuda.test.xz and ref.txz
# (devrun-pack.sh with TEST=HEAD, then tar cJf ref.txz -C ../shared/oracle
# reference); the tree may go without its logs and PTX but
# gdn_chunk_walk2.ptx and gdn_chunk_walk2_tf32.ptx. About 5 minutes; SKIP_ORACLE=1, SKIP_MEASURE=1,
# TESTS (a -test.run pattern) and ROUNDS shorten it.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/w2}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
for fam in gdn_chunk_walk2 gdn_chunk_walk2_tf32; do new_cubin /tmp/s1 $fam $O; done
(cd /tmp && tar czf $O/sass.tgz s1/gdn_chunk_walk2.sm_90.cubin.gz s1/gdn_chunk_walk2_tf32.sm_90.cubin.gz s1/manifest.txt)
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v \
  -test.run "${TESTS:-TestCubinsLoad|TestDeltaChunkKernelMatchesLauncher|TestChunkedDeltaWalk2}" > $O/tests.txt 2>&1)
echo "tests: rc=$?"; grep -E '^(--- FAIL|FAIL|ok|PASS)|panic' $O/tests.txt | head -12
echo "top-level: $(grep -c '^--- PASS' $O/tests.txt) passed, $(grep -c '^--- FAIL' $O/tests.txt) failed"
awk '/=== RUN/{n=$3} /of the RMS/ {print n": "$2" "$3" "$4}' $O/tests.txt | tail -24
if [ -z "${SKIP_ORACLE:-}" ]; then
  (cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 120 $D/cuda.test -test.v \
    -test.run 'TestOracleOnGPU/deltawalk=two$' > $O/oracle.txt 2>&1)
  echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -6; grep -E 'top-1' $O/oracle.txt | head -5
fi
if [ -z "${SKIP_MEASURE:-}" ]; then
  (cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_BENCH=1 timeout 120 $D/cuda.test -test.v -test.run 'TestMeasureDeltaForms$' > $O/measure.txt 2>&1)
  echo "measure: rc=$?"; grep -E 'delta rule|FAIL' $O/measure.txt
fi
echo "tests: $(( $(date +%s) - start )) s"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for be in cuda cuda:deltawalk=two cuda:delta=tf32 cuda:deltawalk=two,delta=tf32; do
    PETAL_CUDA_SASS=/tmp/s1 BENCH_LIMIT=80 bench_run $D/petal $O "$round-$(tag_of $be)" $be --max-context 17000 \
      --prompt-lengths 4K,16K --context-lengths 4K --decode-tokens 32 --repeats 3 --floors=false
  done
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
