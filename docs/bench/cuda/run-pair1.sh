#!/bin/bash
# run-pair1.sh: deltapair=on (gdn_chunk_pair.cu: the delta rule's prep a
# block for two value heads of one key head) on its first GPU run: its
# cubin (into /tmp/sp, beside the tree's; sass-pair.tgz), then on those
# cubins TestChunkedDeltaPairMatchesFrag (the default's bits) and
# TestMeasureDeltaForms, the oracle under deltapair=on (pair-tests.txt),
# and prefill of 4K and 16K tokens (two repeats) under the defaults and
# deltapair=on in two alternating rounds (pair-rounds.tgz, packed again
# after each run).
# From the repository root; $CARRY (default devrun/r22) as
# run-report22.sh's header says, made at a commit with deltapair; the
# tree's logs, results, tokenizer test data and PTX but gdn_chunk_pair.ptx
# left out of the call. About 3 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/r22}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
el() { echo "[$(($(date +%s) - start)) s] $*"; }
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
T=/tmp/pt && rm -rf $T && mkdir -p $T
rm -rf /tmp/sp && cp -r engine/cuda/kernels/sass /tmp/sp
new_cubin /tmp/sp gdn_chunk_pair $T
(cd /tmp && tar czf "$O/sass-pair.tgz" sp/gdn_chunk_pair.* sp/manifest.txt pt/ptxas-gdn_chunk_pair.txt)
cuda_tests /tmp/sp "$D/cuda.test" 'TestChunkedDeltaPairMatchesFrag|TestDeltaChunkKernelMatchesLauncher' $T/tests.txt
grep -E 'sameDeltaBits|element' $T/tests.txt | head -5
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/sp PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 40 "$D/cuda.test" -test.v \
  -test.run '^TestMeasureDeltaForms$' > $T/measure.txt 2>&1)
echo "TestMeasureDeltaForms: rc=$?"; grep -E 'gdn_chunk_prep_(frag|pair|flow)' $T/measure.txt | sed 's/^ *//' | cut -c1-130
PETAL_CUDA_SASS=/tmp/sp oracle_specs "$D" 'defaults|deltapair=on' $T/oracle.txt
cat $T/tests.txt $T/measure.txt $T/oracle.txt > "$O/pair-tests.txt"
el tests
rm -rf /tmp/pr && mkdir -p /tmp/pr
config_rounds "$D" /tmp/pr "$O/pair-rounds.tgz" petal:sp:cuda petal:sp:cuda:deltapair=on
