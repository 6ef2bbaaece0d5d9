#!/bin/bash
# run-router.sh: the router of prefill on the tensor cores (router=tf32,
# ops.cu's qgemm_codes) and a per-kernel profile of decode. Run from the
# repository root with RUN_DIR (default devrun/pending) holding petal.xz
# and cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64: go build
# -ldflags='-s -w' ., go test -c -ldflags='-s -w' ./engine/cuda) and a
# ref.t*z of ../shared/oracle/reference there or in another devrun folder.
# Logs to $OUT: tests.txt (its tests, conformance, the oracle), ptxas.txt,
# bench.txt (router=tf32 against plain, prefill 512 / 4K, decode 4K, with
# norms=fused), ncu.csv (each decode kernel's time and DRAM bytes, graphs
# off so each launch is its own: a decode step's kernels back to back).
R=$(pwd); D=${RUN_DIR:-$R/devrun/pending}; O=${OUT:-/tmp/out}; mkdir -p "$O"
cd "$D" && xz -d -f petal.xz && gunzip -f cuda.test.gz && chmod +x petal cuda.test
REF=$(ls "$D"/ref.t*z "$R"/devrun/*/ref.t*z 2>/dev/null | head -1)
mkdir -p oracle && tar xf "$REF" -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
/usr/local/cuda/bin/ptxas -arch=sm_90 -v "$R/engine/cuda/kernels/ops.ptx" -o /dev/null 2>&1 | grep -A1 qgemm_codes > "$O/ptxas.txt"
(cd "$R/engine/cuda" && timeout 120 "$D/cuda.test" -test.v -test.run 'TestRouterTF32MatchesReference|TestNormRouteMatchesApart|TestConformance/default|TestOracleOnGPU' > "$O/tests.txt" 2>&1; echo "tests: rc=$?" | tee -a "$O/tests.txt")
grep -E '^(--- FAIL|    --- FAIL|panic)' "$O/tests.txt" | head -20
grep -E 'Route: error' "$O/tests.txt" | head -14
for v in router=tf32 router=plain; do
	./petal run --backend cuda:norms=fused,$v --raw --temperature 0 --max-tokens 64 'def fibonacci(n):' > greedy-$v.txt 2>/dev/null
done
cmp -s greedy-router=tf32.txt greedy-router=plain.txt && echo "greedy: the same 64 tokens" | tee -a "$O/bench.txt" || echo "greedy: they differ" | tee -a "$O/bench.txt"
timeout 100 ./petal bench --backend cuda:norms=fused,router=tf32 --synthetic qwen3.6-35b-a3b --max-context 8192 --prompt-lengths 512,4K \
	--context-lengths 4K --decode-tokens 64 --repeats 3 --ablate router=plain >> "$O/bench.txt" 2>&1
grep -E '^ +(256|512|4K) |router' "$O/bench.txt"
timeout 200 /usr/local/cuda/bin/ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --launch-skip 2600 --launch-count 800 \
	./petal bench --backend cuda:graphs=off,norms=fused --synthetic qwen3.6-35b-a3b --max-context 1024 --prompt-lengths 256 \
	--context-lengths 256 --decode-tokens 8 > "$O/ncu.csv" 2> "$O/ncu-err.txt"
echo "ncu: rc=$? $(wc -l < "$O/ncu.csv") lines"
