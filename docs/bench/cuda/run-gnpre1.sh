#!/bin/bash
# run-gnpre1.sh: two decode changes, alone and together, against main:
#   v1 (exp/gnpre, ab1cc79): qmv_group_norm, launched at moe_down's start,
#      asks L2 for every row it will take before its wait (was: the wait first);
#   v2 (exp/dw4, ba16bc5): moe_down in blocks of 4 warps, 128 blocks for the
#      2048 output rows (was 8 warps, 64 blocks: half the multiprocessors);
#   v3 (exp/both, ad333e4): both.
# Makes the changed families' cubins (v1's qmv, v2's moe) beside main's
# committed ones, runs v3's conformance and the MoE / mat-vec tests on v3's,
# then decode at 4K and 32K (and prefill of 512 tokens) for main, v1, v2
# and v3 in two alternating rounds, and a kernel trace of main and v3 at 4K.
# From the repository root (main checked out); devrun/x1 as its BUILT_FROM
# says. Logs in $OUT (logs.tgz, sass-v3.tgz: v3's qmv and moe cubins).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/x1; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
(cd "$D" && tar xJf petals.txz && xz -dkf qmv-v1.ptx.xz && xz -dkf moe-v2.ptx.xz)
gpu_env "$O/env.txt"
K=$R/engine/cuda/kernels/sass
for v in 1 2 3; do rm -rf /tmp/s$v && cp -r $K /tmp/s$v; done
cubin_into /tmp/s1 qmv $D/qmv-v1.ptx; cubin_into /tmp/s3 qmv $D/qmv-v1.ptx
cubin_into /tmp/s2 moe $D/moe-v2.ptx; cubin_into /tmp/s3 moe $D/moe-v2.ptx
echo "cubins: rc=$?; $(grep -E '^(qmv|moe) ' /tmp/s3/manifest.txt | cut -c1-40 | tr '\n' ' ')"
cuda_tests /tmp/s3 $D/cuda.test \
  'TestConformance|TestCubinsLoad|TestMoEMatchesReference|TestMoELayerMatchesApart|TestQMVMatchesReference|TestNormGroupMatchesApart|TestNormRouteMatchesApart' $O/tests.txt
variant_rounds $D $O 3
PETAL=$D/petal TAG=kt-main KT_PROMPTS=512 LIMIT=60 bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace main: rc=$?"
PETAL_CUDA_SASS=/tmp/s3 PETAL=$D/petal-v3 TAG=kt-v3 KT_PROMPTS=512 LIMIT=60 bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace v3: rc=$?"
(cd /tmp/s3 && tar czf $O/sass-v3.tgz qmv.sm_90.cubin.gz moe.sm_90.cubin.gz manifest.txt)
pack_out "$O"
