#!/bin/bash
# Run from the repository root with RUN_DIR (default devrun/pending) holding
# petal.xz, cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64: go build
# -ldflags='-s -w' ., go test -c -ldflags='-s -w' ./engine/cuda) and ref.tgz
# (tar czf ref.tgz -C ../shared/oracle reference, or ref.txz with xz -9e); logs to $OUT.
# The first GPU run of what is written but has not run on a GPU:
# norms=fused, router=tf32 and the snapshot round trip. Their tests, the
# decode kernels', conformance, the oracle; greedy with both switches on
# against both off; bench with both on and each off as an ablation
# (prefill 512 and 4K, decode 256 and 4K).
R=$(pwd); D=${RUN_DIR:-$R/devrun/pending}; O=${OUT:-/tmp/out}; mkdir -p "$O"
cd "$D" && xz -d -f petal.xz && gunzip -f cuda.test.gz && chmod +x petal cuda.test
REF=$(ls "$D"/ref.t*z "$R"/devrun/*/ref.t*z 2>/dev/null | head -1) # or an earlier call's, while the machine is warm
mkdir -p oracle && tar xf "$REF" -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
(cd "$R/engine/cuda" && timeout 80 "$D/cuda.test" -test.v -test.run 'TestNormRouteMatchesApart|TestNormGroupMatchesApart|TestRouterTF32MatchesReference|TestFusedMatchReferences|TestConformance/default|TestOracleOnGPU|TestSnapshotRoundTripOnGPU' > "$O/tests.txt" 2>&1; echo "tests: rc=$?" | tee -a "$O/tests.txt")
grep -E '^(--- FAIL|    --- FAIL|panic)' "$O/tests.txt" | head -20
grep -A8 -- '--- FAIL' "$O/tests.txt" | grep -v PASS | head -30
for v in norms=fused,router=tf32 norms=apart,router=plain; do
	./petal run --backend cuda:$v --raw --temperature 0 --max-tokens 64 'def fibonacci(n):' > greedy-$v.txt 2>/dev/null
done
cmp -s greedy-norms=fused,router=tf32.txt greedy-norms=apart,router=plain.txt && echo "greedy: the same 64 tokens" | tee -a "$O/bench.txt" || echo "greedy: they differ" | tee -a "$O/bench.txt"
timeout 90 ./petal bench --backend cuda:norms=fused,router=tf32 --synthetic qwen3.6-35b-a3b --max-context 8192 --prompt-lengths 512,4K \
	--context-lengths 256,4K --decode-tokens 64 --ablate norms=apart,router=plain >> "$O/bench.txt" 2>&1
grep -E '^ +(256|512|4K) |norms|router|kernel' "$O/bench.txt"
