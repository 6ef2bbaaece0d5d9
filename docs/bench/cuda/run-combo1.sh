#!/bin/bash
# run-combo1.sh: three prefill changes written and not yet run, in one
# call: GC_PREP_VEC=1 (gdn_chunk.cu's build switch: the delta rule's prep
# writing its fragment-order matrices a lane's fragment a store, its q and
# k norms two tokens at a time; the same bits), combinenorm=on (norm_comb.cu:
# the MoE's combine summed inside the next layer's input norm) and
# convprep=on (gdn_chunk_conv.cu: the Gated DeltaNet conv inside the delta
# rule's prep). First the cubins of norm_comb and gdn_chunk_conv (into
# /tmp/s1, beside the tree's) and of the variant's four delta families
# (/tmp/s-vec; sass.tgz); the tests of main (TestDefaultsHaveCubins,
# conformance, TestCombineNormMatchesApart, TestNormCombKernelMatchesLauncher,
# TestConvPrepMatchesApart) and of the variant (the delta rule's bit-for-bit
# tests, TestConvPrepMatchesApart); the oracle under the defaults,
# combinenorm=on, convprep=on and both; prefill of 4K and 16K tokens (two
# repeats) in two alternating rounds, TestMeasureDeltaForms of main and the
# variant between them: main under the defaults, combinenorm=on, convprep=on
# and both, the variant under the defaults and both.
# From the repository root; $CARRY (default devrun/cb) made as
#   V=$(bash docs/bench/cuda/variant-pack.sh devrun/cb vec gdn_chunk.cu:GC_PREP_VEC | tail -1)
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/cb petal=HEAD petal-vec=$V
#   tar cJf devrun/cb/ref.txz -C ../shared/oracle reference
# and the tree's logs, results, tokenizer test data and PTX but
# norm_comb.ptx and gdn_chunk_conv.ptx left out of the call. About 8
# minutes. Logs in $OUT: tests.tgz (the tests, the oracle,
# TestMeasureDeltaForms), rounds.tgz
# (the prefill runs), each packed again as it goes, so that a call cut
# short brings back what it ran; sass.tgz, env.txt.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/cb}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
el() { echo "[$(($(date +%s) - start)) s] $*"; }
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
# the tests' logs in /tmp/t, packed into tests.tgz after each part, so
# that a call cut short brings back what it ran
T=/tmp/t && rm -rf $T && mkdir -p $T
snap() { tar czf "$O/.tests.tgz" -C /tmp t && mv "$O/.tests.tgz" "$O/tests.tgz"; }
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
new_cubin /tmp/s1 norm_comb $T
new_cubin /tmp/s1 gdn_chunk_conv $T
variant_cubins "$D" vec $T
(cd /tmp && tar czf "$O/sass.tgz" s1/norm_comb.* s1/gdn_chunk_conv.* s1/manifest.txt s-vec/gdn_chunk*.cubin.gz s-vec/manifest.txt)
el cubins; snap
cuda_tests /tmp/s1 "$D/cuda.test" \
  'TestDefaultsHaveCubins|TestConformance/default$|TestCombineNormMatchesApart|TestNormCombKernelMatchesLauncher|TestConvPrepMatchesApart|TestFamilyKernelsInPTX' \
  $T/tests-main.txt
el tests main; snap
cuda_tests /tmp/s-vec "$D/cuda-vec.test" \
  'TestChunkedDeltaFragMatchesTF32|TestChunkedDeltaFlowMatchesFrag|TestConvPrepMatchesApart' \
  $T/tests-vec.txt
el tests vec; snap
PETAL_CUDA_SASS=/tmp/s1 oracle_specs "$D" 'defaults|combinenorm=on|convprep=on|convprep=on,combinenorm=on' $T/oracle.txt
el oracle; snap
# the rounds' logs in /tmp/r, packed again after each run (rounds.tgz),
# so that a call cut short brings back what it ran
rm -rf /tmp/r && mkdir -p /tmp/r
rounds() {
  local round=$1 cfg b rest s be
  for cfg in petal:s1:cuda petal:s1:cuda:combinenorm=on petal:s1:cuda:convprep=on petal:s1:cuda:combinenorm=on,convprep=on \
    petal-vec:s-vec:cuda petal-vec:s-vec:cuda:combinenorm=on,convprep=on; do
    b=${cfg%%:*} rest=${cfg#*:}
    s=${rest%%:*} be=${rest#*:}
    PETAL_CUDA_SASS=/tmp/$s BENCH_LIMIT=45 bench_run "$D/$b" /tmp/r "$round-$b-$(tag_of "$be")" "$be" --max-context 17000 \
      --prompt-lengths 4K,16K --context-lengths 256 --decode-tokens 4 --repeats 2 --floors=false
    tar czf "$O/.rounds.tgz" -C /tmp r && mv "$O/.rounds.tgz" "$O/rounds.tgz"
  done
}
rounds 1
el round 1
for v in main vec; do
  if [ $v = main ]; then bin=$D/cuda.test sass=/tmp/s1; else bin=$D/cuda-vec.test sass=/tmp/s-vec; fi
  (cd engine/cuda && PETAL_CUDA_SASS=$sass PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 40 $bin -test.v \
    -test.run '^TestMeasureDeltaForms$' > $T/measure-$v.txt 2>&1)
  echo "TestMeasureDeltaForms $v: rc=$?"; grep -E 'gdn_chunk_prep_(frag|flow)' $T/measure-$v.txt | sed 's/^ *//' | cut -c1-130
done
el measure; snap
if [ $(($(date +%s) - start)) -lt 430 ]; then rounds 2; else el "round 2 skipped"; fi
el all
