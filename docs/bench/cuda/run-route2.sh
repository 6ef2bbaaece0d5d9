#!/bin/bash
# run-route2.sh: the decode router's second form (route.cu: the first group
# fetched before the norm, one fence a block, selection in one warp) and
# qgemm_codes' second (centred codes, each k-step's product added in
# float32), in two calls of the GPU machine (the binaries and the reference
# data do not fit one):
#   tests   RUN_DIR (default devrun/route2t) holds cuda.test.gz and ref.t*z:
#           the router tests, the fused-norm tests, conformance, the oracle;
#   bench   RUN_DIR (default devrun/route2b) holds petal-old.xz (the build
#           of run router1) and petal.xz (this one): the same bench with
#           each, prefill 512 / 4K, decode 256 / 4K, 3 repeats, and each
#           decode router kernel's time under ncu.
# Usage, from the repository root: bash run-route2.sh tests|bench; logs to $OUT.
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"
case $1 in
tests)
	D=${RUN_DIR:-$R/devrun/route2t}; cd "$D" && gunzip -f cuda.test.gz && chmod +x cuda.test
	mkdir -p oracle && tar xf ref.t*z -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
	export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
	/usr/local/cuda/bin/ptxas -arch=sm_90 -v "$R/engine/cuda/kernels/route.ptx" -o /dev/null > "$O/ptxas.txt" 2>&1
	(cd "$R/engine/cuda" && timeout 200 "$D/cuda.test" -test.v -test.run 'TestRoute|TestNormRouteMatchesApart|TestNormGroupMatchesApart|TestFusedMatchReferences|TestConformance|TestOracleOnGPU|TestSnapshotRoundTripOnGPU' > "$O/tests.txt" 2>&1; echo "tests: rc=$?" | tee -a "$O/tests.txt")
	grep -E '^(--- FAIL|    --- FAIL|panic)' "$O/tests.txt" | head -20
	grep -E 'Route: error|routed to|ids ' "$O/tests.txt" | head -20
	;;
bench)
	D=${RUN_DIR:-$R/devrun/route2b}; cd "$D" && xz -d -f petal.xz petal-old.xz && chmod +x petal petal-old
	for p in petal-old petal; do
		echo "==== $p" >> "$O/bench.txt"
		timeout 100 ./$p bench --backend cuda:norms=fused,router=tf32 --synthetic qwen3.6-35b-a3b --max-context 8192 --prompt-lengths 512,4K \
			--context-lengths 256,4K --decode-tokens 64 --repeats 3 >> "$O/bench.txt" 2>&1
	done
	grep -E '^====|^ +(256|512|4K) ' "$O/bench.txt"
	for p in petal-old petal; do
		timeout 100 /usr/local/cuda/bin/ncu --metrics gpu__time_duration.sum --csv --kernel-name regex:route_norm --launch-count 20 \
			./$p bench --backend cuda:graphs=off --synthetic qwen3.6-35b-a3b --max-context 1024 --prompt-lengths 64 \
			--context-lengths 64 --decode-tokens 2 > "$O/ncu-$p.csv" 2>/dev/null
		echo "$p route_norm8 ns: $(grep -o '"gpu__time_duration.sum","ns","[0-9,]*"' "$O/ncu-$p.csv" | cut -d'"' -f6 | tr -d , | tr '\n' ' ')"
	done
	;;
*) echo "usage: run-route2.sh tests|bench" >&2; exit 2 ;;
esac
