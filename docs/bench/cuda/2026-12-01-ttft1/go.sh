#!/bin/bash
# capture on the second run against capture at compile: tests, then
# prefill at short lengths (1 run and the median of 3) and the first
# token of a ~1K-token prompt, both builds
R=$(pwd); D=$R/devrun/ttft; O=${OUT:-/tmp/out}; mkdir -p "$O"
cd "$D" && xz -d -f petal.xz petal-before.xz && gunzip -f cuda.test.gz && chmod +x petal petal-before cuda.test
export PETAL_CUDA_REQUIRE=1
(cd "$R/engine/cuda" && timeout 120 "$D/cuda.test" -test.v -test.run 'TestGraphOutlivesBackend|TestConformance/default|TestFusedMatchReferences|TestPrefill' > "$O/tests.txt" 2>&1; echo "tests: rc=$?" | tee -a "$O/tests.txt")
grep -E '^(--- FAIL|    --- FAIL|panic)' "$O/tests.txt" | head
for b in petal-before petal; do
	for r in 1 3; do
		echo "==== $b --repeats $r" >> "$O/bench.txt"
		timeout 120 ./$b bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 8192 --prompt-lengths 256,512,1K,4K \
			--context-lengths 4K --decode-tokens 64 --repeats $r >> "$O/bench.txt" 2>&1
	done
	echo "==== $b run, a ~1K-token prompt (the embedded model)" >> "$O/bench.txt"
	./$b run --backend cuda --max-tokens 8 "$(cat prompt1k.txt)" > /dev/null 2>> "$O/bench.txt"
done
grep -E '^====|^ +(256|512|1K|4K) |first token' "$O/bench.txt"
for b in petal-before petal; do ./$b run --backend cuda --raw --temperature 0 --max-tokens 64 'def fibonacci(n):' > greedy-$b.txt 2>/dev/null; done
cmp -s greedy-petal-before.txt greedy-petal.txt && echo "greedy: the same 64 tokens from both builds" | tee -a "$O/bench.txt" || echo "greedy: the builds differ" | tee -a "$O/bench.txt"
