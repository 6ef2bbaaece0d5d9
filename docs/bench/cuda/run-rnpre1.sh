#!/bin/bash
# run-rnpre1.sh: more weights and state asked for before a decode kernel's
# wait (as gnpre1 did for the grouped mat-vec), alone and together, against
# main:
#   v1 (exp/rnpre): route_norm asks L2 for its router rows before its wait
#      (was: after);
#   v2 (exp/rnpre2): v1, and the single-matrix mat-vec (out_proj, o_proj,
#      the one before route_norm) lets the next kernel launch at its start;
#   v3 (exp/gdnpre): the Gated DeltaNet step loads its state before its wait;
#   v4 (exp/rall): v2, v3, v5, v6 and v8;
#   v5 (exp/mdpre): moe_gate_up lets moe_down launch right after its wait,
#      and moe_down reads the router's choice and asks L2 for its rows
#      before its own wait (they stream in while moe_gate_up runs);
#   v6 (exp/atpre): qk_prep lets attn_split launch right after its wait, and
#      attn_split asks L2 for its chunk's first 64 rows before its own wait;
#   v7 (exp/rcl-on): routenorm=cluster as the default: the add-and-norm and
#      router in one cluster of 8 blocks meeting at its barrier, rank 0
#      reading the logits through distributed shared memory (its own test
#      binary, cuda-rcl.test: conformance and TestNormRouteMatchesApart);
#   v8 (exp/acomb): attn_combine issues 16 splits' loads before summing them
#      (in split order: the same bits), where its loop waited for L2 a split.
# Makes the changed families' cubins (route, qmv, gdn, gdn_cl, moe, attn,
# attn_shadow; v6's and v8's attn, v7's route) beside main's committed ones, runs v4's
# conformance and the step, router, attention and mat-vec tests on v4's
# cubins and v7's on its own, then decode at 4K and 32K (and prefill of 512
# tokens) for main and v1-v8 in two alternating rounds, and a kernel trace
# of main and v4 at 4K (about 9 minutes). From the repository root (main
# checked out); devrun/x2 as its BUILT_FROM says. Logs in $OUT (logs.tgz;
# sass-v4.tgz: v4's seven cubins and manifest; sass-v7.tgz: v7's route
# cubin and manifest; sass-v8.tgz: v8's attn cubin and manifest).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/x2; mkdir -p "$O" /tmp/x
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
(cd "$D" && tar xJf petals.txz && xz -dc cuda-rcl.test.xz > cuda-rcl.test && chmod +x cuda-rcl.test) && tar xJf "$D/ptx.txz" -C /tmp/x
gpu_env "$O/env.txt"
start=$(date +%s)
K=$R/engine/cuda/kernels/sass
cubin() { cubin_into "$1" "$2" /tmp/x/$2-x.ptx; }  # cubin DIR FAMILY: from /tmp/x/FAMILY-x.ptx
for v in 1 2 3 4 5 6 7 8; do rm -rf /tmp/s$v && cp -r $K /tmp/s$v; done
cubin /tmp/s1 route; cubin /tmp/s2 route; cubin /tmp/s2 qmv
cubin /tmp/s3 gdn; cubin /tmp/s3 gdn_cl; cubin /tmp/s5 moe; cubin_into /tmp/s6 attn /tmp/x/attn-at.ptx; cubin /tmp/s6 attn_shadow
for f in route qmv gdn gdn_cl moe attn attn_shadow; do cubin /tmp/s4 $f; done
cubin_into /tmp/s7 route /tmp/x/route-rcl.ptx; cubin_into /tmp/s8 attn /tmp/x/attn-ac.ptx
echo "cubins: rc=$?; $(grep -E '^(route|qmv|gdn|gdn_cl|moe|attn|attn_shadow) ' /tmp/s4/manifest.txt | cut -c1-30 | tr '\n' ' ')"
cuda_tests /tmp/s4 $D/cuda.test \
  'TestConformance|TestCubinsLoad|TestQMVMatchesReference|TestNormGroupMatchesApart|TestNormRouteMatchesApart|TestGDN|TestRoute|TestFusedMatchReferences|TestMoEMatchesReference|TestAttnMatchesReference|TestKVShadow' $O/tests.txt
cuda_tests /tmp/s7 $D/cuda-rcl.test 'TestConformance|TestNormRouteMatchesApart|TestCubinsLoad' $O/tests-rcl.txt
variant_rounds $D $O 8
echo "tests and rounds: $(( $(date +%s) - start )) s"
if [ $(( $(date +%s) - start )) -lt 460 ]; then  # the traces only where the call's 600 s leave room
  PETAL=$D/petal TAG=kt-main KT_PROMPTS=512 LIMIT=50 bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace main: rc=$?"
  PETAL_CUDA_SASS=/tmp/s4 PETAL=$D/petal-v4 TAG=kt-v4 KT_PROMPTS=512 LIMIT=50 bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace v4: rc=$?"
fi
(cd /tmp/s4 && tar czf $O/sass-v4.tgz route.sm_90.cubin.gz qmv.sm_90.cubin.gz gdn.sm_90.cubin.gz gdn_cl.sm_90.cubin.gz moe.sm_90.cubin.gz attn.sm_90.cubin.gz attn_shadow.sm_90.cubin.gz manifest.txt)
(cd /tmp/s7 && tar czf $O/sass-v7.tgz route.sm_90.cubin.gz manifest.txt)
(cd /tmp/s8 && tar czf $O/sass-v8.tgz attn.sm_90.cubin.gz manifest.txt)
pack_out "$O"
