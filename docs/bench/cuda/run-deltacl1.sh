#!/bin/bash
# run-deltacl1.sh: delta=cluster (gdn_chunk_cl.cu's gdn_chunk_state_cl: the
# chunked delta rule's state pass over thread-block clusters of two
# blocks, each half of a slice's key columns, the partials traded through
# distributed shared memory; written, not yet run) and the device layer's
# clusters under it (TestClusterLaunch), and gdnnorm=cluster (gdn_cl.cu:
# the decode step's gated norm through a cluster of a value head's
# blocks; also written, not yet run). The chunked delta rule's
# tests with every state kernel (16 to 4096 tokens against the float64
# reference, graphs on and off), TestGDNMatchesReference (every split, the
# cluster forms too), conformance (its "clusters" setting takes both),
# TestMeasureDeltaForms (each state kernel
# at 512 and 4096 tokens; gdn_chunk_state_sk took 765 / 116 us on an
# H100, deltask1), then prefill at 2K / 4K / 16K under
# delta=chunked and delta=cluster, decode at 256 / 4K / 16K under the
# defaults and gdnnorm=cluster, in two alternating rounds, then the cubins
# (probe.ptx changed; gdn_cl, gdn_chunk_cl, route_i8, gemm_fit are new: sass.tgz). About 5
# minutes. From the repository root; devrun/dc holds cuda.test.xz,
# driver.test.xz and petal.xz (go build -tags nofixture).
# With them router=i8 (route_i8.cu's qgemm_i8: the prefill router's logits on the
# integer tensor cores, x in four 8-bit parts, float64 sums; written, not
# yet run): TestRouterTensorCoresMatchReference and conformance take it,
# TestMeasureRouter times it beside qgemm_f64_h, prefill at 2K / 4K / 16K
# and 512 under router=i8 against the default, ptxas's registers for it.
# And moefit=on (gemm_fit.cu's w80rp and w160rp, the MoE's tiles sized to
# an expert's rows at 2K and 4K tokens; written, not yet run): the dense
# and MoE GEMM tests take the tiles, prefill compares. ROUNDS (default 1)
# rounds of the benches.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/dc; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
(cd "$D" && xz -dc driver.test.xz > driver.test && chmod +x driver.test)
gpu_env "$O/env.txt"
cd $R/engine/cuda/driver
PETAL_CUDA_REQUIRE=1 timeout 60 $D/driver.test -test.v -test.run 'TestClusterLaunch|TestLaunchClusterRefusesBadShapes|TestLaunchAndGraphReplay' > $O/driver.txt 2>&1
echo "driver tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic|want' $O/driver.txt | head -10
cd $R/engine/cuda
# each group of tests in a process of its own, so that a fault in one new
# kernel leaves the others' results
for tg in 'delta:TestDelta|TestChunkedDelta|TestGDNMatchesReference' 'conformance:TestConformance' \
  'router:TestRouterTensorCores' 'gemm:TestGEMMDenseMatchesReference|TestMoEGroupedMatchesReference|TestGEMMWGModule|TestGEMMGroupArgsMatchKernel'; do
  n=${tg%%:*}
  PETAL_CUDA_REQUIRE=1 timeout 150 $D/cuda.test -test.v -test.run "${tg#*:}" > $O/tests-$n.txt 2>&1
  echo "tests $n: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests-$n.txt | grep -v 'PASS: Test[A-Za-z]*/' | head -8
  grep -E -- '--- FAIL|bar|differ' $O/tests-$n.txt | head -8
done
PETAL_CUDA_BENCH=1 timeout 120 $D/cuda.test -test.v -test.run 'TestMeasureDeltaForms' > $O/measure.txt 2>&1
echo "measure: rc=$?"; grep -E 'rows|µs|us' $O/measure.txt | sed 's/.*gdn_chunk_test.go:[0-9]*: //' | head -12
PETAL_CUDA_BENCH=1 timeout 150 $D/cuda.test -test.v -test.run 'TestMeasureRouter' > $O/router.txt 2>&1
echo "router: rc=$?"; grep -E 'qgemm_i8|qgemm_f64_h' $O/router.txt | grep -E ' (0|1|2|4) blocks an SM' | sed 's/.*backend_test.go:[0-9]*: //' | head -40
grep -E 'qgemm_i8' $O/tests-router.txt | head -6
cd $R
sass_cubins "$O"
PATH=$PATH:/usr/local/cuda/bin ptxas -arch=sm_90 -O3 -v engine/cuda/kernels/route_i8.ptx -o /tmp/ri8.cubin 2>&1 | tee $O/ptxas-route_i8.txt | head -12
PATH=$PATH:/usr/local/cuda/bin ptxas -arch=sm_90a -O3 -v engine/cuda/kernels/gemm_fit.ptx -o /tmp/gf.cubin 2>&1 | tee $O/ptxas-gemm_fit.txt | grep -E "entry|Used|spill" | grep -B2 -A0 Used | grep -v '^--' | head -24
# the benches stop in time for their tar (the call's limit is 600 s)
export -f bench_run tag_of; export D O
timeout $(( SECONDS < 550 ? 560 - SECONDS : 10 )) bash -c '
for round in $(seq 1 ${ROUNDS:-1}); do
  for be in cuda cuda:delta=cluster cuda:router=i8 cuda:moefit=on; do
    bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512,2K,4K,16K \
      --context-lengths 256 --decode-tokens 4 --repeats 2 --floors=false
  done
  for be in cuda cuda:gdnnorm=cluster; do
    bench_run "$D/petal" "$O" "$round-decode-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512 \
      --context-lengths 256,4K,16K --decode-tokens 64 --floors=false
  done
done'
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
