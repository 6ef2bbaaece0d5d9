#!/bin/bash
# run-rnpre2.sh: weights, state and the router's choice read before a decode
# kernel's wait (as gnpre1 did for the grouped mat-vec), alone and together,
# against main (9eee70f's kernels):
#   v1 (exp/rnpre): route_norm asks L2 for its router rows before its wait
#      (was: after);
#   v2 (exp/rnpre2): v1, and the single-matrix mat-vec (out_proj, o_proj,
#      the one before route_norm) lets the next kernel launch after its wait;
#   v3 (exp/gdnpre): the Gated DeltaNet step loads its state (through L2)
#      before its wait;
#   v4 (exp/rall): all of v2, v3, v5, v6 and v7;
#   v5 (exp/mdpre): moe_gate_up lets moe_down launch right after its wait,
#      and moe_down reads the router's choice (through L2) and asks L2 for
#      all its rows before its own wait (they stream in while moe_gate_up
#      runs);
#   v6 (exp/atpre): qk_prep lets attn_split launch right after its wait, and
#      attn_split reads the position and asks L2 for its chunk's first 64
#      rows before its own wait;
#   v7 (exp/acomb): attn_combine issues 16 splits' loads before folding
#      them (in split order: the same bits), where its loop waited for L2
#      a split;
#   v8 (exp/gupre): moe_gate_up asks L2 for every row its warp will take
#      (the router's choice known) before its first step;
#   v9 (exp/qpipe): the grouped mat-vecs (qmv_group_norm: a layer's first
#      projections) load the first group of the next step's rows before
#      this step's arithmetic.
# Makes the changed families' cubins (from $D/ptx.txz: FAMILY-vN.ptx) beside
# main's committed ones, runs v4's GPU tests (conformance, the decode
# kernels against their references) on v4's cubins, then decode at 4K and
# 32K (and prefill of 512 tokens) for main and v1-v9 in three alternating
# rounds, and a kernel trace of main and v4 at 4K where the call's time
# leaves room. From the repository root (main checked out); devrun/x3 as
# its BUILT_FROM says. Logs in $OUT (logs.tgz; sass.tgz: sN/ with each
# variant's changed cubins and its manifest).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/x3}; mkdir -p "$O" /tmp/x
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
(cd "$D" && for t in petals*.txz; do tar xJf $t; done) && tar xJf "$D/ptx.txz" -C /tmp/x
gpu_env "$O/env.txt"
start=$(date +%s)
K=$R/engine/cuda/kernels/sass
for v in 1 2 3 4 5 6 7 8 9; do
  rm -rf /tmp/s$v && cp -r $K /tmp/s$v
  for p in /tmp/x/*-v$v.ptx; do f=$(basename $p -v$v.ptx); cubin_into /tmp/s$v $f $p || echo "cubin v$v $f: failed"; done
done
echo "cubins: $(grep -E '^(route|qmv|gdn|gdn_cl|moe|attn|attn_shadow) ' /tmp/s4/manifest.txt | cut -c1-30 | tr '\n' ' ')"
cuda_tests /tmp/s4 $D/cuda.test \
  'TestConformance|TestCubinsLoad|TestQMVMatchesReference|TestNormGroupMatchesApart|TestNormRouteMatchesApart|TestGDN|TestRoute|TestFusedMatchReferences|TestMoEMatchesReference|TestAttnMatchesReference|TestKVShadow' $O/tests.txt
ROUNDS=3 variant_rounds $D $O 9
echo "tests and rounds: $(( $(date +%s) - start )) s"
if [ $(( $(date +%s) - start )) -lt 460 ]; then  # the traces only where the call's 600 s leave room
  PETAL=$D/petal TAG=kt-main KT_PROMPTS=512 LIMIT=50 bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace main: rc=$?"
  PETAL_CUDA_SASS=/tmp/s4 PETAL=$D/petal-v4 TAG=kt-v4 KT_PROMPTS=512 LIMIT=50 bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace v4: rc=$?"
fi
# every variant's changed cubins and its manifest, as sN/ in one archive
(cd /tmp && tar czf $O/sass.tgz $(for v in 1 2 3 4 5 6 7 8 9; do echo s$v/manifest.txt; for p in /tmp/x/*-v$v.ptx; do echo s$v/$(basename $p -v$v.ptx).sm_90.cubin.gz; done; done))
pack_out "$O"
