#!/bin/bash
# run-pairflow1.sh: deltaflow=pair (gdn_chunk_pairflow.cu: deltaflow's prep
# with deltapair's work, one block of two value heads a multiprocessor
# beside a state block) on its first GPU run: its cubin (into /tmp/sf,
# beside the tree's; sass-pairflow.tgz), then on those cubins
# TestChunkedDeltaFlowMatchesFrag (the default's bits, pair forms among
# them), TestChunkedDeltaPairMatchesFrag and TestMeasureDeltaForms, the
# oracle under deltaflow=pair (pairflow-tests.txt), and prefill of 4K and
# 16K tokens (two repeats) under the defaults, deltaflow=on and
# deltaflow=pair in two alternating rounds (pairflow-rounds.tgz, packed
# again after each run). The same for the variant "ahead" (gdn_chunk.cu's
# GC_FLOW_AHEAD=1: the pair-flow prep asking L2 for its next task's rows
# first): its cubin (/tmp/s-ahead), the flow test, TestMeasureDeltaForms,
# and deltaflow=pair in the rounds. And sharedside=on (the shared expert
# on a second stream beside the router and the routed experts):
# TestSharedSideMatchesApart, the oracle, and its prefill in the rounds.
# And attn=wgo (attn_prefill_wgo.cu: flash_wgp's arithmetic with its wgmma
# kept pipelined by ptxas): its cubin (its C75xx notes counted),
# TestFlashWGOMatchesWGP (flash_wgp's bits), TestFlashAttnMatchesReference,
# TestMeasureFlash (every flash kernel at 4096 rows, positions 0 to 124K),
# the oracle, and its prefill in the rounds.
# From the repository root; $CARRY (default devrun/pf) made as
#   V=$(bash docs/bench/cuda/variant-pack.sh devrun/pf ahead gdn_chunk.cu:GC_FLOW_AHEAD | tail -1)
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/pf petal=HEAD petal-ahead=$V
#   tar cJf devrun/pf/ref.txz -C ../shared/oracle reference
# and the tree's logs, results, tokenizer test data and PTX but
# gdn_chunk_pairflow.ptx and attn_prefill_wgo.ptx left out of the call. About 4 minutes, then the
# kernel traces below (about 1.5) if the call is not past 360 s.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/pf}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
T=/tmp/pt
call_setup "$D" "$R" "$O" $T /tmp/sf
new_cubin /tmp/sf gdn_chunk_pairflow $T
new_cubin /tmp/sf attn_prefill_wgo $T
rm -rf /tmp/s1 && cp -r /tmp/sf /tmp/s1 && variant_cubins "$D" ahead $T
(cd /tmp && tar czf "$O/sass-pairflow.tgz" sf/gdn_chunk_pairflow.* sf/attn_prefill_wgo.* sf/manifest.txt s-ahead/gdn_chunk_pairflow.* s-ahead/manifest.txt pt/ptxas-*.txt pt/ahead)
cuda_tests /tmp/sf "$D/cuda.test" 'TestChunkedDeltaFlowMatchesFrag|TestChunkedDeltaPairMatchesFrag|TestChunkedDeltaFragMatchesTF32|TestDefaultsHaveCubins|TestSharedSideMatchesApart|TestFlashWGOMatchesWGP|TestFlashAttnMatchesReference' $T/tests.txt
grep -E 'element|want' $T/tests.txt | head -5
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/sf PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 90 "$D/cuda.test" -test.v \
  -test.run '^(TestMeasureDeltaForms|TestMeasureFlash)$' > $T/measure.txt 2>&1)
echo "TestMeasureDeltaForms, TestMeasureFlash: rc=$?"; grep -E 'gdn_chunk_prep_(frag|pair|flow|pair_flow)\+' $T/measure.txt | sed 's/^ *//' | cut -c1-130
grep -E 'flash bf16 flash_wg' $T/measure.txt | sed 's/^ *//' | cut -c1-130
PETAL_CUDA_SASS=/tmp/sf oracle_specs "$D" 'defaults|deltaflow=pair|sharedside=on|attn=wgo' $T/oracle.txt
cuda_tests /tmp/s-ahead "$D/cuda-ahead.test" 'TestChunkedDeltaFlowMatchesFrag' $T/tests-ahead.txt
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s-ahead PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 40 "$D/cuda-ahead.test" -test.v \
  -test.run '^TestMeasureDeltaForms$' > $T/measure-ahead.txt 2>&1)
echo "TestMeasureDeltaForms ahead: rc=$?"; grep -E 'gdn_chunk_prep_pair_flow\+' $T/measure-ahead.txt | sed 's/^ *//' | cut -c1-130
cat $T/tests.txt $T/measure.txt $T/oracle.txt $T/tests-ahead.txt $T/measure-ahead.txt > "$O/pairflow-tests.txt"
el tests
rm -rf /tmp/pr && mkdir -p /tmp/pr
config_rounds "$D" /tmp/pr "$O/pairflow-rounds.tgz" petal:sf:cuda petal:sf:cuda:deltaflow=on petal:sf:cuda:deltaflow=pair \
  petal-ahead:s-ahead:cuda:deltaflow=pair petal:sf:cuda:sharedside=on petal:sf:cuda:attn=wgo
# then, if time is left, the kernel traces of a 4K prefill under the
# defaults and deltaflow=pair (ktrace-def.csv.gz, ktrace-pairflow.csv.gz,
# as run-flowtrace1.sh): where the pair's prep and the state pass go, and
# whether they run side by side
if [ $(($(date +%s) - start)) -lt 360 ]; then
  for run in def:cuda pairflow:cuda:deltaflow=pair; do
    PETAL_CUDA_SASS=/tmp/sf OUT=$O PETAL=$D/petal TAG=${run%%:*} BACKEND=${run#*:} KT_PROMPTS=4K KT_CONTEXTS=256 LIMIT=100 \
      bash docs/bench/cuda/run-ktrace.sh 2>&1 | tail -4
  done
  el traces
else
  el "traces skipped"
fi
