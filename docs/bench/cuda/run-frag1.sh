#!/bin/bash
# run-frag1.sh: delta=tf32frag (gdn_chunk_frag.cu: the prep writing W,
# γ·Q, the masked q·k and the decayed K rounded to tf32 in the tensor
# cores' fragment order, the state pass reading a fragment with one load)
# on its first run. ptxas makes its cubin into a copy of the built-in ones
# (/tmp/s1, kept in sass.tgz); on them TestChunkedDeltaFragMatchesTF32 (bit
# for bit against delta=tf32's kernels of the same tiles, and the float64
# reference's bar), TestDeltaChunkKernelMatchesLauncher and the oracle
# under delta=tf32frag; TestMeasureDeltaForms (every state kernel at 512
# and 4096 tokens, the prep included); prefill of 512 / 4K / 16K tokens,
# three runs a length, under the defaults and delta=tf32frag in two
# alternating rounds. From the repository root; $CARRY (default
# devrun/fr) holds petals.txz (petal, -tags nofixture), cuda.test.xz and
# ref.txz; the tree may go without its logs and PTX but gdn_chunk_frag.ptx.
# About 3 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/fr}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
new_cubin /tmp/s1 gdn_chunk_frag $O
(cd /tmp && tar czf $O/sass.tgz s1/gdn_chunk_frag.sm_90.cubin.gz s1/manifest.txt)
cuda_tests /tmp/s1 $D/cuda.test "${TESTS:-TestChunkedDeltaFragMatchesTF32|TestDeltaChunkKernelMatchesLauncher|TestChunkedDeltaTF32MatchesReference}" $O/tests.txt
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 100 $D/cuda.test -test.v \
  -test.run 'TestOracleOnGPU/(defaults|delta=tf32frag)$' > $O/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -4; grep -E 'top-1' $O/oracle.txt | cut -c1-200 | head -10
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_BENCH=1 timeout 150 $D/cuda.test -test.v -test.run '^TestMeasureDeltaForms$' > $O/measure.txt 2>&1)
echo "measure: rc=$?"; grep -E 'delta rule' $O/measure.txt | sed 's/.*delta rule, //' | head -20
echo "tests: $(( $(date +%s) - start )) s"
PETAL_CUDA_SASS=/tmp/s1 prefill_rounds $D/petal $O cuda cuda:delta=tf32frag
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
