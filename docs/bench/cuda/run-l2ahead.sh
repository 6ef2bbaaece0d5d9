#!/bin/bash
# run-l2ahead.sh: l2ahead=on (a second stream asking L2 for the next
# decode kernel's weights) checked by the conformance suite with graphs on
# and off, then decode at 256 / 4K / 16K of context with it off and on,
# two rounds (A B A B). From the repository root; devrun/la holds
# cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c
# -ldflags='-s -w' ./engine/cuda; gzip) and petal.xz (go build the same
# way; xz -9). About 2 minutes. The option and its kernel were removed
# after this ran (2026-12-06-l2ahead1: decode 15 % slower); they are in
# commit bd0bc1c.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/la; mkdir -p "$O"
cd $D && gunzip -f cuda.test.gz && chmod +x cuda.test && xz -dc petal.xz > petal && chmod +x petal
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 120 $D/cuda.test -test.v -test.run "${TESTS:-TestConformance/l2ahead|TestPlanAhead}" > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | head
cd $R
for round in 1 2; do
  for be in cuda cuda:l2ahead=on; do
    f=bench-$round-$(echo $be | tr ':=' '_.')
    timeout 100 $D/petal bench --backend $be --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths 512 \
      --context-lengths 256,4K,16K --decode-tokens 64 --repeats 3 --out $O/$f.json > $O/$f.txt 2>&1
    echo "$be round $round: rc=$?"; grep -E '^ +[0-9]+K? ' $O/$f.txt
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
