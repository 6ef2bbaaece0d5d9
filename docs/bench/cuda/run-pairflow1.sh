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
# again after each run).
# From the repository root; $CARRY (default devrun/pf): cuda.test.xz and
# petals.txz of a commit with deltaflow=pair (TEST=HEAD devrun-pack.sh
# devrun/pf petal=HEAD) and the oracle's ref.txz (tar cJf devrun/pf/ref.txz
# -C ../shared/oracle reference); the tree's logs, results, tokenizer test
# data and PTX but gdn_chunk_pairflow.ptx left out of the call. About 3
# minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/pf}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
el() { echo "[$(($(date +%s) - start)) s] $*"; }
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
T=/tmp/pt && rm -rf $T && mkdir -p $T
rm -rf /tmp/sf && cp -r engine/cuda/kernels/sass /tmp/sf
new_cubin /tmp/sf gdn_chunk_pairflow $T
(cd /tmp && tar czf "$O/sass-pairflow.tgz" sf/gdn_chunk_pairflow.* sf/manifest.txt pt/ptxas-gdn_chunk_pairflow.txt)
cuda_tests /tmp/sf "$D/cuda.test" 'TestChunkedDeltaFlowMatchesFrag|TestChunkedDeltaPairMatchesFrag|TestChunkedDeltaFragMatchesTF32|TestDefaultsHaveCubins' $T/tests.txt
grep -E 'element|want' $T/tests.txt | head -5
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/sf PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 40 "$D/cuda.test" -test.v \
  -test.run '^TestMeasureDeltaForms$' > $T/measure.txt 2>&1)
echo "TestMeasureDeltaForms: rc=$?"; grep -E 'gdn_chunk_prep_(frag|pair|flow|pair_flow)\+' $T/measure.txt | sed 's/^ *//' | cut -c1-130
PETAL_CUDA_SASS=/tmp/sf oracle_specs "$D" 'defaults|deltaflow=pair' $T/oracle.txt
cat $T/tests.txt $T/measure.txt $T/oracle.txt > "$O/pairflow-tests.txt"
el tests
rm -rf /tmp/pr && mkdir -p /tmp/pr
for round in 1 2; do
  for be in cuda cuda:deltaflow=on cuda:deltaflow=pair; do
    PETAL_CUDA_SASS=/tmp/sf BENCH_LIMIT=45 bench_run "$D/petal" /tmp/pr "$round-$(tag_of "$be")" "$be" --max-context 17000 \
      --prompt-lengths 4K,16K --context-lengths 256 --decode-tokens 4 --repeats 2 --floors=false
    tar czf "$O/.pairflow-rounds.tgz" -C /tmp pr && mv "$O/.pairflow-rounds.tgz" "$O/pairflow-rounds.tgz"
  done
  el "round $round"
done
