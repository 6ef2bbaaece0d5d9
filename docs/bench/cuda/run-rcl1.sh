#!/bin/bash
# run-rcl1.sh: routenorm=cluster (route_cl.cu: the post-attention norm and
# the router of a decoded token in one thread-block cluster of 8 blocks,
# rank 0 reading the others' logits from their shared memory) against
# routenorm=ticket (route.cu, the default), same binary: its GPU tests
# (TestRouteNormClusterMatchesTicket, TestNormRouteMatchesApart with the
# cluster form, conformance), then decode at 4K and 32K (and prefill of 512
# tokens) under each in three alternating rounds, and a kernel trace of each
# at 4K where the call's time leaves room. route_cl has no committed cubin
# yet: ptxas makes one into a copy of the committed ones (/tmp/s1, both
# settings run on it), kept in sass.tgz for the commit if the form wins.
# From the repository root; $CARRY (default devrun/rc) holds petals.txz
# (petal of main, -tags nofixture) and cuda.test.xz of main
# (TEST=main bash docs/bench/cuda/devrun-pack.sh devrun/rc petal=main).
# About 4 minutes. Logs in $OUT (logs.tgz, sass.tgz).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/rc}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
P=/tmp/route_cl.ptx; (cd engine/cuda/kernels && cp route_cl.ptx $P)
/usr/local/cuda/bin/ptxas -arch=sm_90 -O3 -v $P -o /tmp/s1/route_cl.sm_90.cubin > $O/ptxas.txt 2>&1 && gzip -9 -n -f /tmp/s1/route_cl.sm_90.cubin &&
  echo "route_cl sm_90 $(sha256sum $P | cut -d' ' -f1) $(/usr/local/cuda/bin/ptxas --version | grep -oE 'V[0-9.]+' | head -1)" >> /tmp/s1/manifest.txt
echo "cubin: rc=$?; $(grep -E 'registers|spill' $O/ptxas.txt | tr '\n' ' ' | cut -c1-300)"
cuda_tests /tmp/s1 $D/cuda.test 'TestRouteNormClusterMatchesTicket|TestNormRouteMatchesApart|TestConformance|TestCubinsLoad|TestRouteMatchesReference' $O/tests.txt
routenorm_rounds /tmp/s1 $D/petal $O 3
echo "tests and rounds: $(( $(date +%s) - start )) s"
if [ $(( $(date +%s) - start )) -lt 400 ]; then  # the traces only where the call's time leaves room
  for be in cuda cuda:routenorm=cluster; do
    PETAL_CUDA_SASS=/tmp/s1 PETAL=$D/petal BACKEND=$be TAG=kt-$(tag_of $be) KT_PROMPTS=512 LIMIT=50 \
      bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace $be: rc=$?"
  done
fi
(cd /tmp && tar czf $O/sass.tgz s1/route_cl.sm_90.cubin.gz s1/manifest.txt)
pack_out "$O"
