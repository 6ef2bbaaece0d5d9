#!/bin/bash
# (Ran as docs/bench/cuda/2026-12-06-pipe2.)
# run-pipe.sh: the kernels written on 2026-12-06 after the report of
# bench/results/2026-12-06-h100-cuda-4, none yet run on a GPU, checked and
# timed in one call: gemm_tile's WG = 4 (w256rp, w128rp, w64rp: gemm=wgrp;
# w32r, w16r: moe=wg) through the GEMM tests and TestMeasureGEMM,
# flash_wgp_bf16_d256 (attn=wgp) through the flash attention tests and
# TestMeasureFlash, and qgemm_f64_w3 (the router) through
# TestRouterTensorCoresMatchReference and TestMeasureRouter; ncu of q_proj
# at 4096 rows on w256rp (w256r's is in 2026-12-06-wgr1), of the MoE's
# gate/up at 512 tokens on s16 and w16r, and of flash_wg and flash_wgp at
# 4096 rows from position 28,672. The prefill runs are
# run-pipe-bench.sh's (a second call: together they pass the ten minutes
# of one). From the
# repository root; devrun/nx holds cuda.test.gz (CGO_ENABLED=0 GOOS=linux
# GOARCH=amd64 go test -c -ldflags='-s -w' ./engine/cuda; gzip) and
# petal.xz (go build the same way; xz -9). About 6 minutes. The oracle
# (TestOracleOnGPU runs attn=wgp,moe=wg,gemm=wgrp) is run-split.sh's.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/nx; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run 'TestGEMMDense|TestMoEGrouped|TestGEMMTilesFit|TestGEMMWGModule|TestRouterTensorCores' > $O/tests-gemm.txt 2>&1
echo "gemm tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests-gemm.txt | head; grep -E -- '--- FAIL' $O/tests-gemm.txt | head -12
PETAL_CUDA_REQUIRE=1 timeout 90 $D/cuda.test -test.v -test.run 'TestFlashAttnMatchesReference/flash_wg' > $O/tests-flash.txt 2>&1
PETAL_CUDA_REQUIRE=1 timeout 60 $D/cuda.test -test.v -test.run 'TestFlashAttnInBackend' >> $O/tests-flash.txt 2>&1
echo "flash tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic|registers' $O/tests-flash.txt | head; grep -cE -- '--- FAIL.*flash_wgp' $O/tests-flash.txt
PETAL_CUDA_BENCH=1 timeout 240 $D/cuda.test -test.v -test.run 'TestMeasureGEMM|TestMeasureFlash|TestMeasureRouter' > $O/measure.txt 2>&1
grep -E 'registers' $O/measure.txt | grep -E 'rp|w16r|w32r' | sed 's/.*gemm_test.go:[0-9]*: //'
grep -E 'dense .*M=4096' $O/measure.txt | sed 's/.*M=4096//' | tr '|' '\n' | grep -E 'w256r|w128r|w64r|default' | paste -s -d' ' | cut -c1-400
grep -E 'moe T=(512|1024|4096) +skew 0.0 (s16|w16r|w32r|w64r|w64rp|w128r|w128rp) ' $O/measure.txt | sed 's/.*gemm_test.go:[0-9]*: //' | cut -c1-200
grep -E 'flash bf16' $O/measure.txt | sed 's/.*attn_prefill_test.go:[0-9]*: //'
grep -E 'router (512|4096) rows' $O/measure.txt | sed 's/.*backend_test.go:[0-9]*: //'
# NCU: kernel:skip[:test] (the test TestMeasureGEMM unless named; TestMeasureFlash times
# each kernel 8 launches a position, so skip 8 is position 28,672)
for ks in ${NCU:-gemm_dense_w256rp:23 gemm_gateup_w16r:0 gemm_gateup_s16:0 flash_wg_bf16_d256:8:TestMeasureFlash flash_wgp_bf16_d256:8:TestMeasureFlash}; do
  IFS=: read -r k skip test <<< "$ks"
  PETAL_CUDA_BENCH=1 timeout 90 ncu --kill yes --kernel-name $k --launch-skip $skip --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    $D/cuda.test -test.run ${test:-TestMeasureGEMM} > $O/ncu-$k.txt 2>&1
  echo "== $k"; grep -E "Duration|Issue Slots Busy|DRAM Throughput|Mem Busy|Achieved Occ|Registers Per" $O/ncu-$k.txt | head -8
done
(cd $O && ls ncu-* >/dev/null 2>&1 && tar czf ncu.tgz ncu-* && rm -f ncu-*)
