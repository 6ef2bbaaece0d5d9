#!/bin/bash
# run-router7.sh: qgemm_i8 in route_i8w.cu's block shapes (router=i8t, i8w,
# i8n, i8g, i8wg) on their first run, and today's defaults on their cubins:
# TestDefaultsHaveCubins, conformance under the defaults,
# TestRouterShapesMatchI8 and TestRouterTensorCoresMatchReference
# (tests.txt); the oracle under the defaults (oracle.txt); route_i8w's
# cubin (sass.tgz, ptxas-route_i8w.txt); TestMeasureRouter (router.txt:
# every shape at 16 to 16384 rows); prefill of 512 / 4K / 16K tokens under
# the defaults and ROUTERS (default router=i8w and router=i8g) in ROUNDS
# (default 2) alternating rounds and `petal bench --profile` at 4K under
# today's defaults (rounds.tgz); then, while the call has time, Nsight
# Compute on
# qgemm_i8, qgemm_i8_w and route_select at 4096 rows with the warps' stall
# reasons (ncu.tgz): what of the router's 126-142 µs a layer is the
# logits' kernel and what the selection. From the repository root; $CARRY (default devrun/r22):
# cuda.test.xz and petals.txz (petal) of main, the oracle's ref.txz; the
# tree's logs, results, tokenizer test data and PTX left out of the call
# but route_i8w.ptx. About 4 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/r22}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
rm -rf /tmp/s22 && mkdir -p /tmp/s22 && cp engine/cuda/kernels/sass/manifest.txt /tmp/s22/
new_cubin /tmp/s22 route_i8w /tmp/s22
(cd /tmp && tar czf $O/sass.tgz s22/route_i8w.* s22/manifest.txt s22/ptxas-*.txt)
cuda_tests '' $D/cuda.test \
  'TestDefaultsHaveCubins|TestConformance/default$|TestRouterShapesMatchI8|TestRouterTensorCoresMatchReference' $O/tests.txt
oracle_specs $D 'defaults' $O/oracle.txt
(cd engine/cuda && PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 120 $D/cuda.test -test.v \
  -test.run '^TestMeasureRouter$' > $O/router.txt 2>&1)
echo "TestMeasureRouter: rc=$?"; grep -E 'router +(512|4096|16384) rows, qgemm_i8' $O/router.txt | sed 's/.*: router/router/' | head -60
echo "tests: $(( $(date +%s) - start )) s"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for be in cuda ${ROUTERS:-cuda:router=i8w cuda:router=i8g}; do
    BENCH_LIMIT=40 bench_run $D/petal $O "$round-$(tag_of $be)" $be --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  done
done
timeout 60 $D/petal bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 5000 \
  --prompt-lengths 4K --context-lengths 4K --decode-tokens 16 --profile > $O/bench-profile.txt 2>&1
echo "profile: rc=$?"; grep -A14 "^profile at 4K" $O/bench-profile.txt | cut -c1-110
(cd $O && tar czf rounds.tgz bench-* && rm -f bench-*)
echo "rounds and profile: $(( $(date +%s) - start )) s"
if [ $(( $(date +%s) - start )) -lt ${NCU_BEFORE:-300} ]; then
  # qgemm_i8 and each shape: 5 splits x 23 launches a row count, 4096 rows the fifth count;
  # route_select follows every router kernel: 6 shapes x 5 + 3 float64 kernels x 6, 23 launches each
  NCU="qgemm_i8:463:TestMeasureRouter qgemm_i8_w:463:TestMeasureRouter route_select:4419:TestMeasureRouter" \
    STALLS=1 NTIME=60 CARRY=${CARRY:-devrun/r22} \
    bash docs/bench/cuda/run-ncu2.sh 2>&1 | grep -v '^unpack' | head -60
fi
echo "all: $(( $(date +%s) - start )) s"
