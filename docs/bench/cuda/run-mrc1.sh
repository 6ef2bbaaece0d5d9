#!/bin/bash
# run-mrc1.sh: moelayer=cluster (moe_route.cu: the post-attention norm and
# the router inside every thread-block cluster of the gate/up launch, the
# down launch writing the norm's sum back) and routenorm=cluster
# (route_cl.cu), neither with a committed cubin yet: ptxas makes both into
# a copy of the committed ones (/tmp/s1, every run here on it; kept in
# sass.tgz for the commit). Then their GPU tests and the fused forms'
# (bit for bit against the three kernels), conformance, the oracle under
# the defaults, and decode at 4K and 32K (prefill of 512) under the
# default, routenorm=cluster and moelayer=cluster in ROUNDS alternating
# rounds (default 2), and a kernel trace of moelayer=cluster at 4K where
# the call's time leaves room. From the repository root; $CARRY (default
# devrun/mr) holds petals.txz (petal, -tags nofixture), cuda.test.xz and
# ref.txz (the oracle's reference):
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/mr petal=HEAD
#   tar cJf devrun/mr/ref.txz -C ../shared/oracle reference
# The tree may go without its logs and without every PTX but route_cl.ptx,
# moe_route.ptx and clock/ (the carry's room):
#   git ls-files 'docs/bench/cuda/2026-*' 'bench/results' 'engine/**/*.ptx' |
#     grep -v -e route_cl.ptx -e moe_route.ptx -e /clock/ | xargs rm -f
# (and git checkout -- . after the call). The phase clocks
# (TestMeasureMoELayerClusterPhases, TestMeasureDecodePhases) follow the
# tests. About 7 minutes. Logs in $OUT (tests.tgz
# and sass.tgz as soon as the tests are done, logs.tgz at the end).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/mr}; mkdir -p "$O" /tmp/o
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
for fam in route_cl moe_route; do
  P=/tmp/$fam.ptx; cp engine/cuda/kernels/$fam.ptx $P
  /usr/local/cuda/bin/ptxas -arch=sm_90 -O3 -v $P -o /tmp/s1/$fam.sm_90.cubin > $O/ptxas-$fam.txt 2>&1 && gzip -9 -n -f /tmp/s1/$fam.sm_90.cubin &&
    echo "$fam sm_90 $(sha256sum $P | cut -d' ' -f1) $(/usr/local/cuda/bin/ptxas --version | grep -oE 'V[0-9.]+' | head -1)" >> /tmp/s1/manifest.txt
  echo "$fam cubin: rc=$?; $(grep -E 'registers|spill' $O/ptxas-$fam.txt | tr '\n' ' ' | cut -c1-400)"
done
cuda_tests /tmp/s1 $D/cuda.test 'TestMoELayerClusterMatchesApart|TestRouteNormClusterMatchesTicket|TestNormRouteMatchesApart|TestMoELayerMatchesApart|TestConformance|TestCubinsLoad|TestRouteMatchesReference' $O/tests.txt
grep -E -- '--- FAIL|_test.go:[0-9]+:' $O/tests.txt | head -20
if [ -z "${SKIP_ORACLE:-}" ]; then
  (cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 150 $D/cuda.test -test.v -test.run 'TestOracleOnGPU/defaults$' > $O/oracle.txt 2>&1)
  echo "oracle: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/oracle.txt | head -6; grep -E 'top-1|KL' $O/oracle.txt | head -8
fi
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_CUDA_BENCH=1 timeout 90 $D/cuda.test -test.v \
  -test.run 'TestMeasureMoELayerClusterPhases|TestMeasureDecodePhases' > $O/phases.txt 2>&1)
echo "phases: rc=$?"; grep -E 'up:|down:|gate/up|route_norm8|selection|ticket|logits' $O/phases.txt | head -24
echo "tests: $(( $(date +%s) - start )) s"
(cd /tmp && tar czf $O/sass.tgz s1/route_cl.sm_90.cubin.gz s1/moe_route.sm_90.cubin.gz s1/manifest.txt)
(cd $O && tar czf tests.tgz ptxas-*.txt tests.txt phases.txt $(ls oracle.txt 2>/dev/null) && rm -f ptxas-*.txt tests.txt phases.txt oracle.txt)  # kept if the call is cut short
for round in $(seq 1 ${ROUNDS:-2}); do
  for be in cuda cuda:routenorm=cluster cuda:moelayer=cluster; do
    PETAL_CUDA_SASS=/tmp/s1 BENCH_LIMIT=50 bench_run $D/petal $O "$round-$(tag_of $be)" $be --max-context 40000 \
      --prompt-lengths 512 --context-lengths 4K,32K --decode-tokens 64 --floors=false
  done
  (cd $O && tar czf rounds-$round.tgz bench-$round-* && rm -f bench-$round-*)  # kept if the call is cut short
done
echo "tests and rounds: $(( $(date +%s) - start )) s"
if [ $(( $(date +%s) - start )) -lt ${TRACE_BEFORE:-430} ]; then  # the trace only where the call's time leaves room
  PETAL_CUDA_SASS=/tmp/s1 PETAL=$D/petal BACKEND=cuda:moelayer=cluster TAG=kt-mr KT_PROMPTS=512 LIMIT=60 \
    bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace moelayer=cluster: rc=$?"
fi
pack_out "$O"
