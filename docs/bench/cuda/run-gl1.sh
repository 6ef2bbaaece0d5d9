#!/bin/bash
# run-gl1.sh: the decode launches written and not yet run on a GPU, each
# without a committed cubin: gdnlayer=cluster (gdn_layer.cu: a Gated
# DeltaNet layer's input norm, projections and step in one launch, a
# thread-block cluster a key head), gdnlayer=out (its output projection in
# that launch too), attnout=on (attn_out.cu: attention's combine and the
# output projection in one launch), moelayer=cluster (moe_route.cu: the
# post-attention norm and the router inside every cluster of the gate/up
# launch) and routenorm=cluster (route_cl.cu). ptxas makes their cubins into a copy of
# the committed ones (/tmp/s1, every run here on it; kept in sass.tgz for
# the commit). Then their GPU tests and the fused forms' (against the
# kernels they replace), the driver's cluster occupancy, conformance, the
# oracle under the defaults and under all of them
# (moelayer=cluster,gdnlayer=out,attnout=on), the phase clocks (gdn_layer's
# too), and decode at 4K and 32K (prefill of 512) under the default,
# moelayer=cluster, gdnlayer=out and all of them in ROUNDS alternating
# rounds (default 2), and a kernel trace of the last at 4K where the call's
# time leaves room.
# From the repository root; $CARRY (default devrun/gl) holds petals.txz (petal,
# -tags nofixture), cuda.test.xz, driver.test.xz and ref.txz (the
# oracle's reference):
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/gl petal=HEAD
#   CGO_ENABLED=0 go test -c -o /tmp/driver.test ./engine/cuda/driver && xz -9 -c /tmp/driver.test > devrun/gl/driver.test.xz
#   tar cJf devrun/gl/ref.txz -C ../shared/oracle reference
# The tree may go without its logs and without every PTX but route_cl.ptx,
# moe_route.ptx, gdn_layer.ptx, attn_out.ptx and clock/ (the carry's room):
#   git ls-files 'docs/bench/cuda/2026-*' 'bench/results' 'engine/**/*.ptx' |
#     grep -v -e route_cl.ptx -e moe_route.ptx -e gdn_layer.ptx -e attn_out.ptx -e /clock/ | xargs rm -f
# (and restore the deleted files after the call, before anything is
# committed). About 8 minutes. Logs in $OUT (tests.tgz and sass.tgz as soon
# as the tests are done, rounds-N.tgz after each round, logs.tgz at the end).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/gl}; mkdir -p "$O" /tmp/o
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz && xz -dc driver.test.xz > driver.test && chmod +x driver.test)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
for fam in route_cl moe_route gdn_layer attn_out; do
  P=/tmp/$fam.ptx; cp engine/cuda/kernels/$fam.ptx $P
  /usr/local/cuda/bin/ptxas -arch=sm_90 -O3 -v $P -o /tmp/s1/$fam.sm_90.cubin > $O/ptxas-$fam.txt 2>&1 && gzip -9 -n -f /tmp/s1/$fam.sm_90.cubin &&
    echo "$fam sm_90 $(sha256sum $P | cut -d' ' -f1) $(/usr/local/cuda/bin/ptxas --version | grep -oE 'V[0-9.]+' | head -1)" >> /tmp/s1/manifest.txt
  echo "$fam cubin: rc=$?; $(grep -E 'registers|spill' $O/ptxas-$fam.txt | tr '\n' ' ' | cut -c1-400)"
done
cuda_tests /tmp/s1 $D/cuda.test 'TestDecodeFormsEngage|TestGDNLayerClusterMatchesApart|TestGDNLayerOutMatchesApart|TestAttnOutMatchesApart|TestAttnOutArgsMatchKernel|TestNormGroupMatchesApart|TestGDNMatchesReference|TestMoELayerClusterMatchesApart|TestRouteNormClusterMatchesTicket|TestNormRouteMatchesApart|TestMoELayerMatchesApart|TestConformance|TestCubinsLoad|TestRouteMatchesReference' $O/tests.txt
grep -E -- '--- FAIL|_test.go:[0-9]+:' $O/tests.txt | head -20
(cd engine/cuda/driver && timeout 60 $D/driver.test -test.v -test.run 'TestMaxActiveClusters|TestClusterLaunch' > $O/driver.txt 2>&1)
echo "driver tests: rc=$?"; grep -E -- '--- |clusters of' $O/driver.txt | head -8
if [ -z "${SKIP_ORACLE:-}" ]; then
  (cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 200 $D/cuda.test -test.v -test.run 'TestOracleOnGPU/(defaults|moelayer=cluster,gdnlayer=out,attnout=on)$' > $O/oracle.txt 2>&1)
  echo "oracle: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/oracle.txt | head -8; grep -E 'top-1|KL' $O/oracle.txt | head -8
fi
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_CUDA_BENCH=1 timeout 90 $D/cuda.test -test.v \
  -test.run 'TestMeasureGDNLayerPhases|TestMeasureMoELayerClusterPhases|TestMeasureDecodePhases' > $O/phases.txt 2>&1)
echo "phases: rc=$?"; grep -E 'up:|down:|gate/up|route_norm8|selection|ticket|logits|gdn_layer|cluster met|rule done|rows done|^end|norm written' $O/phases.txt | head -40
echo "tests: $(( $(date +%s) - start )) s"
(cd /tmp && tar czf $O/sass.tgz s1/route_cl.sm_90.cubin.gz s1/moe_route.sm_90.cubin.gz s1/gdn_layer.sm_90.cubin.gz s1/attn_out.sm_90.cubin.gz s1/manifest.txt)
(cd $O && tar czf tests.tgz ptxas-*.txt tests.txt driver.txt phases.txt $(ls oracle.txt 2>/dev/null) && rm -f ptxas-*.txt tests.txt driver.txt phases.txt oracle.txt)  # kept if the call is cut short
for round in $(seq 1 ${ROUNDS:-2}); do
  for be in cuda cuda:moelayer=cluster cuda:gdnlayer=out cuda:moelayer=cluster,gdnlayer=out,attnout=on; do
    PETAL_CUDA_SASS=/tmp/s1 BENCH_LIMIT=50 bench_run $D/petal $O "$round-$(tag_of $be)" $be --max-context 40000 \
      --prompt-lengths 512 --context-lengths 4K,32K --decode-tokens 64 --floors=false
  done
  (cd $O && tar czf rounds-$round.tgz bench-$round-* && rm -f bench-$round-*)  # kept if the call is cut short
done
echo "tests and rounds: $(( $(date +%s) - start )) s"
if [ $(( $(date +%s) - start )) -lt ${TRACE_BEFORE:-420} ]; then  # the trace only where the call's time leaves room
  PETAL_CUDA_SASS=/tmp/s1 PETAL=$D/petal BACKEND=cuda:moelayer=cluster,gdnlayer=out,attnout=on TAG=kt-gl KT_PROMPTS=512 LIMIT=60 \
    bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace moelayer=cluster,gdnlayer=out,attnout=on: rc=$?"
fi
pack_out "$O"
