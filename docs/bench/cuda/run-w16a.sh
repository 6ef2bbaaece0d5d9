#!/bin/bash
# run-w16a.sh: deltastate=w16 and w16k (gdn_chunk_w16.cu: delta=tf32frag's
# state pass over 16 warps a block instead of 8) on their first run: the
# family's cubin made first (sass.tgz), TestChunkedDeltaFragMatchesTF32 on
# it (w16's and w16k's bits against gdn_chunk_state_tf32's, so against
# the default's, and the bar against the float64 reference, up to 4096
# tokens) and TestDeltaChunkKernelMatchesLauncher (tests.txt), then
# TestMeasureDeltaForms (every state kernel alone at 512 and 4096 tokens;
# measure.txt), prefill of 512 / 4K / 16K tokens under the defaults,
# deltastate=w16 and deltastate=w16k in ROUNDS (default 2) alternating
# rounds (rounds.tgz), and `petal bench --profile` at 4K under
# deltastate=w16 (profile.txt: delta.rule's share, 18.9 % under the
# defaults in prof3). From the repository root; $CARRY (default
# devrun/ep): cuda.test.xz and petals.txz (petal) of a main that has
# deltastate; the tree's gdn_chunk_w16.ptx in the call. About 4 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/ep}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
rm -rf /tmp/s27 && cp -r engine/cuda/kernels/sass /tmp/s27
new_cubin /tmp/s27 gdn_chunk_w16 /tmp/s27
(cd /tmp && tar czf $O/sass.tgz s27/gdn_chunk_w16.* s27/manifest.txt s27/ptxas-*.txt)
export PETAL_CUDA_SASS=/tmp/s27
cuda_tests /tmp/s27 $D/cuda.test 'TestChunkedDeltaFragMatchesTF32|TestDeltaChunkKernelMatchesLauncher' $O/tests.txt
(cd engine/cuda && PETAL_CUDA_REQUIRE=1 PETAL_CUDA_BENCH=1 timeout 90 $D/cuda.test -test.v -test.run 'TestMeasureDeltaForms' > $O/measure.txt 2>&1)
echo "measure: rc=$?"; grep -E 'delta rule, \[gdn_chunk_prep_frag' $O/measure.txt | sed 's/^ *//' | cut -c1-140
echo "tests and measure: $(( $(date +%s) - start )) s"
ROUNDS=${ROUNDS:-2} prefill_rounds $D/petal $O cuda cuda:deltastate=w16 cuda:deltastate=w16k
(cd $O && tar czf rounds.tgz bench-* && rm -f bench-*)
timeout 60 $D/petal bench --backend cuda:deltastate=w16 --synthetic qwen3.6-35b-a3b --max-context 5000 \
  --prompt-lengths 4K --context-lengths 4K --decode-tokens 16 --profile > $O/profile.txt 2>&1
echo "profile: rc=$?"; grep -A20 "^profile at 4K" $O/profile.txt | grep -E 'delta.rule|all' | cut -c1-110
echo "all: $(( $(date +%s) - start )) s"
