#!/bin/bash
# run-flashwg.sh: attn=wg (attn_prefill_wg.cu's flash_wg_bf16_d256, and
# its _alt twin with V's layout read the other way): the flash attention
# tests (every kind), TestKVToBF16, TestMeasureFlash, then prefill at 4K /
# 16K / 32K with attn=wide and attn=wg alternating, two rounds, and 128K
# once each. From the
# repository root; devrun/fw holds cuda.test.gz (CGO_ENABLED=0 GOOS=linux
# GOARCH=amd64 go test -c -ldflags='-s -w' ./engine/cuda; gzip) and
# petal.xz (go build the same way; xz -9). About 4 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/fw; mkdir -p "$O"
cd $D && gunzip -f cuda.test.gz && chmod +x cuda.test && xz -dc petal.xz > petal && chmod +x petal
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 240 $D/cuda.test -test.v -test.run "${TESTS:-TestKVToBF16|TestFlashAttn}" > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- FAIL|ok|FAIL|PASS)|panic|registers' $O/tests.txt | head -30; grep -cE -- '--- FAIL.*/wg/' $O/tests.txt; grep -cE -- '--- FAIL.*_alt/' $O/tests.txt; echo "passed: $(grep -c -- '--- PASS' $O/tests.txt)"
PETAL_CUDA_BENCH=1 timeout 120 $D/cuda.test -test.v -test.run 'TestMeasureFlash' > $O/measure.txt 2>&1
grep -E 'flash |kv_to_bf16' $O/measure.txt | sed 's/.*attn_prefill_test.go:[0-9]*: //'
cd $R
for round in 1 2; do
  for be in cuda:attn=wide cuda:attn=wg; do
    f=bench-$round-$(echo $be | tr ':=' '_.')
    timeout 100 $D/petal bench --backend $be --synthetic qwen3.6-35b-a3b --max-context 33000 --prompt-lengths 4K,16K,32K \
      --context-lengths 256 --decode-tokens 8 --repeats 2 --out $O/$f.json > $O/$f.txt 2>&1
    echo "$be round $round: rc=$?"; grep -E '^ +[0-9]+K? ' $O/$f.txt
  done
done
for be in cuda:attn=wide cuda:attn=wg; do
  f=bench-128K-$(echo $be | tr ':=' '_.')
  timeout 100 $D/petal bench --backend $be --synthetic qwen3.6-35b-a3b --max-context 131100 --prompt-lengths 128K \
    --context-lengths 256 --decode-tokens 8 --repeats 1 --out $O/$f.json > $O/$f.txt 2>&1
  echo "$be 128K: rc=$?"; grep -E '^ +[0-9]+K? ' $O/$f.txt
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
