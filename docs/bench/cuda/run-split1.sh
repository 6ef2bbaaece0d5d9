#!/bin/bash
# (moesplit=on and moe_split.cu were removed after this run, which found
# its launch over the driver layer's 24 parameters and the atomics it would
# need too slow; its BENCHES default names it, so later calls set BENCHES.)
# run-split1.sh: the first run of the split projections (splitk.h):
# moesplit=on (moe_split.cu: a token's experts in one launch, the down
# projection split over the experts' hidden rows), gdnsplit=on
# (gdn_split.cu: the Gated DeltaNet step and the layer's output projection
# in one launch) and attnsplit=on (attn_out_split.cu: attention's combine
# and o_proj in one launch), their parts summed by atomics as 64-bit fixed
# point. Their tests (TestMoESplitMatchesReference, TestGDNSplitMatchesApart,
# TestAttnSplitMatchesApart, TestDecodeFormsEngage), the oracle under all three, TestMeasureSplitReduce and
# TestMeasurePhases (phase.cu: the atomics alone; a phase's row loaded
# into registers or shared memory before its wait) and TestMeasureMoELayer
# (32 layers' router and experts apart and as moe_split), then decode at 4K and
# 32K (prefill of 512) under the defaults and each form, one round.
# From the repository root; $CARRY (default devrun/gl2) holds petals.txz
# (petal, -tags nofixture), cuda.test.xz and ref.txz (devrun-pack.sh with
# TEST=HEAD, then ref.txz as run-gl1.sh says); the tree may go without its
# logs and PTX. About 5 minutes; SKIP_ORACLE=1, SKIP_PHASES=1, TESTS (a
# -test.run pattern) and BENCHES (--backend specs) shorten or change it.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/gl2}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
(cd engine/cuda && PETAL_CUDA_REQUIRE=1 timeout 150 $D/cuda.test -test.v \
  -test.run "${TESTS:-TestMoESplitMatchesReference|TestGDNSplitMatchesApart|TestAttnSplitMatchesApart|TestDecodeFormsEngage}" > $O/tests.txt 2>&1)
echo "tests: rc=$?"; grep -E -- '^(--- |    --- )|FAIL|panic' $O/tests.txt | head -30
grep -E 'run 0 out|run 1 out' $O/tests.txt | head -12
if [ -z "${SKIP_ORACLE:-}" ]; then
  (cd engine/cuda && PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 120 $D/cuda.test -test.v \
    -test.run 'TestOracleOnGPU/gdnsplit=on,moesplit=on,attnsplit=on$' > $O/oracle.txt 2>&1)
  echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -8; grep -E 'top-1' $O/oracle.txt | head -6
fi
if [ -z "${SKIP_PHASES:-}" ]; then
  (cd engine/cuda && PETAL_CUDA_BENCH=1 timeout 120 $D/cuda.test -test.v -test.run 'TestMeasureSplitReduce$|TestMeasurePhases$|TestMeasureMoELayer$' > $O/phases.txt 2>&1)
  echo "phases: rc=$?"; grep -E 'µs a phase|µs a launch|µs/layer|FAIL|phases,' $O/phases.txt
fi
echo "tests: $(( $(date +%s) - start )) s"
for be in ${BENCHES:-cuda cuda:moesplit=on cuda:gdnsplit=on cuda:gdnsplit=on,moesplit=on,attnsplit=on}; do
  BENCH_LIMIT=50 bench_run $D/petal $O "1-$(tag_of $be)" $be --max-context 40000 \
    --prompt-lengths 512 --context-lengths 4K,32K --decode-tokens 64 --floors=false
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
