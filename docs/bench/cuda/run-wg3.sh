#!/bin/bash
# run-wg3.sh: the wgmma tiles with two warpgroups (w128o2, w256o) checked
# (TESTS) and timed beside the others (TestMeasureGEMM), prefill with each
# in m128's place (petal bench --ablate wg128=...), and where a prompt's
# and a decoded token's time goes under the defaults (--profile). From the
# repository root; devrun/c3 holds cuda.test.gz (CGO_ENABLED=0 GOOS=linux
# GOARCH=amd64 go test -c -ldflags='-s -w' ./engine/cuda; gzip) and
# petal.xz (go build the same way; xz -9). About 6 minutes. (The option
# wg128 it names was removed after the run: 2026-12-06-wg3/command.sh.)
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/c3; mkdir -p "$O"
cd $D && gunzip -f cuda.test.gz && chmod +x cuda.test && xz -dc petal.xz > petal && chmod +x petal
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run "${TESTS:-TestGEMMDense|TestMoEGrouped|TestGEMMTilesFit|TestGEMMWGModule|TestConformance}" > $O/tests.txt 2>&1
echo "tests: rc=$?" | tee -a $O/tests.txt; grep -E '^(--- FAIL|FAIL|ok|PASS)|panic' $O/tests.txt | head
PETAL_CUDA_BENCH=1 timeout 150 $D/cuda.test -test.v -test.run TestMeasureGEMM > $O/measure.txt 2>&1
grep -E 'registers|dense .*M=4096|skew 0.0 (m128|w)' $O/measure.txt | sed 's/.*gemm_test.go:[0-9]*: //' | cut -c1-250
cd $R
timeout 150 $D/petal bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths 512,1K,4K,16K \
	--context-lengths 256 --decode-tokens 8 --repeats 3 --ablate ${ABLATE:-wg128=w128o2,wg128=w256o} --ablate-lengths 512,1K,4K,16K \
	--out $O/bench.json > $O/bench.txt 2>&1; echo "bench: rc=$?"; tail -16 $O/bench.txt
timeout 170 $D/petal bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 131200 --prompt-lengths 512,4K,32K \
	--context-lengths 4K,128K --decode-tokens 16 --profile --out $O/profile.json > $O/profile.txt 2>&1; echo "profile: rc=$?"; tail -60 $O/profile.txt
