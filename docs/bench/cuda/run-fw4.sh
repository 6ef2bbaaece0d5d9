#!/bin/bash
# run-fw4.sh: the oracle under the defaults since fw3 (the 256-row
# register-A tiles' late copies and delta=tf32frag, never yet run together)
# and under delta=tf32, with TestCubinsLoad, on the tree's cubins; w256rs
# (gemm=wgrs) with one empty-barrier arrival a warp, its bits and its
# time beside w256rp; then
# prefill of 512 / 1K / 4K / 16K tokens under main, main with moefit=width
# (fw2: the MoE of 4096 tokens 2 % faster, prefill not yet timed) and the
# variant `late6` (GEMM_RA_LATE_LOAD=6: the 128-row tiles' copies late
# too, 3-4 % less time in fw3's TestMeasureGEMM) on cubins of its own PTX,
# in ROUNDS (default 2) alternating rounds; then (RCL=1, the default)
# routenorm=cluster's tests and decode at 4K and 32K against the default,
# three rounds (run-rcl1.sh's, on the same binary).
# From the repository root; $CARRY (default devrun/f4): cuda.test.xz and
# petals.txz (petal, petal-late6) of main, ptx-late6.txz, ref.txz:
#   c=$(bash docs/bench/cuda/variant-pack.sh devrun/f4 late6 GEMM_RA_LATE_LOAD=6 | tail -1)
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/f4 petal=HEAD petal-late6=$c
#   rm devrun/f4/cuda-late6.test.xz; cp <the oracle's ref.txz> devrun/f4/
# and the tree's PTX left out of the call but gemm_wg, gemm_fit,
# gemm_downbf, gemm_fitw and gemm_ws.ptx. About 5 minutes. Logs in $OUT:
# logs-1.tgz (the oracle), logs.tgz (the rounds), ptxas.tgz, sass.tgz
# (late6's cubin folder).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/f4}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
# gemm_ws's committed cubin is older than its PTX (w256rs's producer and
# arrivals since fw3): remade for the measurement below
grep -q "^gemm_ws [a-z0-9_]* $(sha256sum engine/cuda/kernels/gemm_ws.ptx | cut -d' ' -f1) " /tmp/s1/manifest.txt || new_cubin /tmp/s1 gemm_ws $O
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 120 $D/cuda.test -test.v \
  -test.run 'TestOracleOnGPU/(defaults|delta=tf32)$' > $O/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^ *--- ' $O/oracle.txt | head -12
grep -E 'top-1' $O/oracle.txt | sed 's/.*: seq/seq/; s/.*: chat/chat/' | cut -c1-150 | head -10
cuda_tests /tmp/s1 $D/cuda.test 'TestCubinsLoad|TestDefaultsHaveCubins|TestGEMMProducerMatchesUndrained' $O/tests.txt
# w256rs with one arrival a consumer warp at the empty barriers (fw3: one a
# thread, 285-293 TFLOP/s against w256rp's 455-480)
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_BENCH=1 PETAL_MEASURE_TILES=w256rp,w256rs timeout 100 \
  $D/cuda.test -test.v -test.run '^TestMeasureGEMM$' > $O/measure-gemm.txt 2>&1)
echo "TestMeasureGEMM: rc=$?"; grep -E "^ *gemm_test.go:[0-9]+: dense" $O/measure-gemm.txt | cut -c1-160 | head -14
echo "part 1: $(( $(date +%s) - start )) s"
pack_out "$O" && mv $O/logs.tgz $O/logs-1.tgz  # kept should the rounds be cut short
variant_cubins $D late6 $O
(cd /tmp && tar czf $O/sass.tgz s-late6) && (cd $O && tar czf ptxas.tgz late6 && rm -rf late6)
for round in $(seq 1 "${ROUNDS:-2}"); do
  for run in petal:s1:cuda petal:s1:cuda:moefit=width petal-late6:s-late6:cuda; do
    b=${run%%:*} rest=${run#*:}; s=${rest%%:*} be=${rest#*:}
    PETAL_CUDA_SASS=/tmp/$s BENCH_LIMIT=50 bench_run $D/$b $O "$round-$b-$(tag_of "$be")" "$be" --max-context 17000 \
      --prompt-lengths 512,1K,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  done
done
echo "prefill rounds: $(( $(date +%s) - start )) s"
# routenorm=cluster (route_cl.cu, run-rcl1.sh's, never yet run beyond its
# cubin) against the default ticket form, same binary: its tests, then
# decode at 4K and 32K in three alternating rounds, where time is left
if [ "${RCL:-1}" = 1 ] && [ $(( $(date +%s) - start )) -lt 330 ]; then
  cuda_tests /tmp/s1 $D/cuda.test 'TestRouteNormClusterMatchesTicket|TestNormRouteMatchesApart|TestRouteMatchesReference' $O/tests-rcl.txt
  routenorm_rounds /tmp/s1 $D/petal $O 3
fi
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
