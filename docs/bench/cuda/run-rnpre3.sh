#!/bin/bash
# run-rnpre3.sh: after rnpre2's winner landed (moe_down's early reads,
# d7ac4b4): the oracle on main, and what else could come before a wait,
# on top of it, against main and against main before the landing:
#   v1 (exp/rn2b): route_norm asks L2 for its router rows before its wait,
#      and the single-matrix mat-vec lets the next kernel launch after its
#      wait (rnpre2's v2 on main);
#   v2 (exp/gushared): moe_gate_up asks L2 for the shared expert's rows
#      (which do not depend on the router) before its wait;
#   v3 (exp/all2): v1, v2 and rnpre2's v3 (gdn_step loads its state
#      through L2 before its wait);
#   v4: main before the landing (9eee70f), its own cubins.
# TestOracleOnGPU under the defaults with main's test binary, v3's GPU tests
# on v3's cubins, then decode at 4K and 32K (and prefill of 512 tokens) for
# main and v1-v4 in three alternating rounds, and a kernel trace of main
# and v3 at 4K where the call's time leaves room. From the repository
# root, with the tree's PTX and logs left out (the carry's room: the
# binaries embed their PTX); devrun/x4 as its BUILT_FROM says. Logs in
# $OUT (logs.tgz; sass.tgz: sN/ with each variant's changed cubins and its
# manifest).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/x4}; mkdir -p "$O" /tmp/x
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R"
(cd "$D" && for t in petals*.txz; do tar xJf $t; done && xz -dc cuda-all2.test.xz > cuda-all2.test && chmod +x cuda-all2.test) &&
  tar xJf "$D/ptx.txz" -C /tmp/x
gpu_env "$O/env.txt"
start=$(date +%s)
(cd engine/cuda && PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 200 $D/cuda.test -test.v \
  -test.run 'TestOracleOnGPU/defaults$' > $O/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/oracle.txt | head -8; grep -E 'top-1' $O/oracle.txt | head -5
K=$R/engine/cuda/kernels/sass
for v in 1 2 3; do
  rm -rf /tmp/s$v && cp -r $K /tmp/s$v
  for p in /tmp/x/*-v$v.ptx; do f=$(basename $p -v$v.ptx); cubin_into /tmp/s$v $f $p || echo "cubin v$v $f: failed"; done
done
rm -rf /tmp/s4 && cp -r $D/sass-old /tmp/s4
cuda_tests /tmp/s3 $D/cuda-all2.test \
  'TestConformance|TestCubinsLoad|TestQMVMatchesReference|TestNormGroupMatchesApart|TestNormRouteMatchesApart|TestGDN|TestRoute|TestFusedMatchReferences|TestMoEMatchesReference|TestKVShadow' $O/tests.txt
ROUNDS=3 variant_rounds $D $O 4
echo "oracle, tests and rounds: $(( $(date +%s) - start )) s"
if [ $(( $(date +%s) - start )) -lt 300 ]; then  # the traces only where the call and the time left leave room
  PETAL=$D/petal TAG=kt-main KT_PROMPTS=512 LIMIT=50 bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace main: rc=$?"
  PETAL_CUDA_SASS=/tmp/s3 PETAL=$D/petal-v3 TAG=kt-v3 KT_PROMPTS=512 LIMIT=50 bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace v3: rc=$?"
fi
(cd /tmp && tar czf $O/sass.tgz $(for v in 1 2 3; do echo s$v/manifest.txt; for p in /tmp/x/*-v$v.ptx; do echo s$v/$(basename $p -v$v.ptx).sm_90.cubin.gz; done; done))
pack_out "$O"
