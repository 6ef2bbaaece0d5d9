#!/bin/bash
# run-dstate1.sh: three forms of delta=tf32frag's state pass on their
# first run: deltastate=w16 and w16k (gdn_chunk_w16.cu: 16 warps a block
# instead of 8) and deltaflow=on (gdn_chunk_flow.cu: the prep and the
# state pass at once, each block of tokens handed over by a flag). Both
# families' cubins made first (sass.tgz); then
# TestChunkedDeltaFragMatchesTF32 (w16's and w16k's bits against
# gdn_chunk_state_tf32's), TestChunkedDeltaFlowMatchesFrag (the flow's
# bits against the default's over two runs, graphs on and off, pdl=off,
# its flags back at zero) and TestDeltaChunkKernelMatchesLauncher
# (tests.txt); TestMeasureDeltaForms (every state kernel alone at 512 and
# 4096 tokens; measure.txt); prefill of 512 / 4K / 16K tokens under the
# defaults, deltastate=w16, deltastate=w16k and deltaflow=on in ROUNDS
# (default 2) alternating rounds (rounds.tgz); `petal bench --profile` at
# 4K under deltaflow=on (profile.txt: delta.rule's share, 18.9 % under
# the defaults in prof3). From the repository root; $CARRY (default
# devrun/ep): cuda.test.xz and petals.txz (petal) of a main that has
# deltastate and deltaflow; the tree's gdn_chunk_w16.ptx and
# gdn_chunk_flow.ptx in the call. About 5 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/ep}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
rm -rf /tmp/s27 && cp -r engine/cuda/kernels/sass /tmp/s27
new_cubin /tmp/s27 gdn_chunk_w16 /tmp/s27
new_cubin /tmp/s27 gdn_chunk_flow /tmp/s27
(cd /tmp && tar czf $O/sass.tgz s27/gdn_chunk_w16.* s27/gdn_chunk_flow.* s27/manifest.txt s27/ptxas-*.txt)
export PETAL_CUDA_SASS=/tmp/s27
cuda_tests /tmp/s27 $D/cuda.test 'TestChunkedDeltaFragMatchesTF32|TestChunkedDeltaFlowMatchesFrag|TestDeltaChunkKernelMatchesLauncher' $O/tests.txt
(cd engine/cuda && PETAL_CUDA_REQUIRE=1 PETAL_CUDA_BENCH=1 timeout 90 $D/cuda.test -test.v -test.run 'TestMeasureDeltaForms' > $O/measure.txt 2>&1)
echo "measure: rc=$?"; grep -E 'delta rule, \[gdn_chunk_prep_(frag|flow)' $O/measure.txt | sed 's/^ *//' | cut -c1-140
echo "tests and measure: $(( $(date +%s) - start )) s"
ROUNDS=${ROUNDS:-2} prefill_rounds $D/petal $O cuda cuda:deltastate=w16 cuda:deltastate=w16k cuda:deltaflow=on
(cd $O && tar czf rounds.tgz bench-* && rm -f bench-*)
timeout 60 $D/petal bench --backend cuda:deltaflow=on --synthetic qwen3.6-35b-a3b --max-context 5000 \
  --prompt-lengths 4K --context-lengths 4K --decode-tokens 16 --profile > $O/profile.txt 2>&1
echo "profile: rc=$?"; grep -A20 "^profile at 4K" $O/profile.txt | grep -E 'delta.rule|all' | cut -c1-110
echo "all: $(( $(date +%s) - start )) s"
