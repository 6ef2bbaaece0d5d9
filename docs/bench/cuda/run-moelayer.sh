#!/bin/bash
# run-moelayer.sh: moe_layer (the MoE block of a decoded token in one
# launch, moelayer=one) checked and measured against the three kernels it
# replaces (moelayer=three), in one call of the GPU machine. devrun/ml holds
# cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c
# -ldflags='-s -w' ./engine/cuda), petal.xz (go build the same way, xz) and
# ref.txz (tar cJf ref.txz -C ../shared/oracle reference).
#   1. ptxas -v: the registers and spills of the moe_layer entry points;
#   2. the tests TESTS names (default: moe_layer against the three kernels
#      and the float64 reference, the router and MoE kernels, conformance,
#      the oracle);
#   3. petal bench with each spec of SPECS (default cuda and
#      cuda:moelayer=three), ROUNDS rounds (default 2) alternating, prefill
#      512, decode 256 / 4K / 16K;
#   4. every kernel of the default build's decode at 4K traced (run-ktrace.sh).
# From the repository root; logs to $OUT.
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"; D=$R/devrun/ml
cd "$D" && gunzip -f cuda.test.gz && chmod +x cuda.test && xz -d -f petal.xz && chmod +x petal
[ -f ref.txz ] && mkdir -p oracle && tar xf ref.txz -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
cd "$R"
/usr/local/cuda/bin/ptxas -arch=sm_90 -v engine/cuda/kernels/moe.ptx -o /tmp/moe.cubin > "$O/ptxas.txt" 2>&1
grep -A3 "moe_layer_i8x3_sb_r8\|moe_gate_up_i8x3_sb\|moe_down_i8x3_sb" "$O/ptxas.txt" | grep -E "Compiling|registers|spill" | head -12
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
(cd engine/cuda && timeout 240 "$D/cuda.test" -test.v -test.run "${TESTS:-TestMoELayer|TestMoEMatchesReference|TestNormRouteMatchesApart|TestFusedMatchReferences|TestConformance}" > "$O/tests.txt" 2>&1; echo "tests: rc=$?" | tee -a "$O/tests.txt")
grep -E '^(--- FAIL|    --- FAIL|panic|ok|FAIL)' "$O/tests.txt" | head -20
grep -E '^(--- |    --- )' "$O/tests.txt" | head -30
for r in $(seq ${ROUNDS:-2}); do
	for spec in ${SPECS:-cuda:moelayer=one cuda:moelayer=three}; do
		echo "==== round $r --backend $spec" >> "$O/bench.txt"
		timeout 120 "$D/petal" bench --backend $spec --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths 512 \
			--context-lengths 256,4K,16K --decode-tokens 64 --repeats 3 >> "$O/bench.txt" 2>&1
	done
done
grep -E '^====|^ +[0-9K]+ ' "$O/bench.txt"
PETAL=$D/petal TAG=cuda BACKEND=cuda:moelayer=one KT_PROMPTS=512 LIMIT=100 bash docs/bench/cuda/run-ktrace.sh
