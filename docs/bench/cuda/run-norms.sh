#!/bin/bash
# Run from the repository root with RUN_DIR (default devrun/norms) holding
# petal.xz, cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64: go build
# -ldflags='-s -w' ., go test -c -ldflags='-s -w' ./engine/cuda) and ref.tgz
# (tar czf ref.tgz -C ../shared/oracle reference); logs to $OUT.
# norms=fused: the tests (its own, the decode kernels, conformance, the
# oracle), greedy against norms=apart, decode speed with both
R=$(pwd); D=${RUN_DIR:-$R/devrun/norms}; O=${OUT:-/tmp/out}; mkdir -p "$O"
cd "$D" && xz -d -f petal.xz && gunzip -f cuda.test.gz && chmod +x petal cuda.test
mkdir -p oracle && tar xzf ref.tgz -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
(cd "$R/engine/cuda" && timeout 80 "$D/cuda.test" -test.v -test.run 'TestNormRouteMatchesApart|TestNormGroupMatchesApart|TestFusedMatchReferences|TestConformance/default|TestOracleOnGPU|TestSnapshotRoundTripOnGPU' > "$O/tests.txt" 2>&1; echo "tests: rc=$?" | tee -a "$O/tests.txt")
grep -E '^(--- FAIL|    --- FAIL|panic)' "$O/tests.txt" | head -20
grep -A8 -- '--- FAIL' "$O/tests.txt" | grep -v PASS | head -30
for v in norms=fused norms=apart; do
	./petal run --backend cuda:$v --raw --temperature 0 --max-tokens 64 'def fibonacci(n):' > greedy-$v.txt 2>/dev/null
done
cmp -s greedy-norms=fused.txt greedy-norms=apart.txt && echo "greedy: the same 64 tokens" | tee -a "$O/bench.txt" || echo "greedy: they differ" | tee -a "$O/bench.txt"
timeout 60 ./petal bench --backend cuda:norms=fused --synthetic qwen3.6-35b-a3b --max-context 8192 --prompt-lengths 4K \
	--context-lengths 256,4K --decode-tokens 64 --ablate norms=apart >> "$O/bench.txt" 2>&1
grep -E '^ +(256|4K) |norms|kernel' "$O/bench.txt"
