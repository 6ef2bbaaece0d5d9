#!/bin/bash
# run-qstage.sh: a change to the decode kernels checked and measured against
# the build before it in one call of the GPU machine. devrun/ml holds
# cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c
# -ldflags='-s -w' ./engine/cuda) and petals.txz (petal and petal-old, the
# build before, built the same way: XZ_OPT='-9 -T1' tar cJf petals.txz
# petal petal-old; the two share most bytes, so xz keeps them in 19 MB).
#   1. ptxas -v: local memory (stack frames) and spills of every entry point;
#   2. the tests TESTS names;
#   3. the phase measurements PHASES names (default
#      TestMeasureMoELayerPhases: moe_layer's);
#   4. petal bench with each RUN of RUNS (binary:--backend spec), ROUNDS
#      rounds alternating, prefill 512, decode 256 / 4K / 16K;
#   5. every kernel of the new build's decode at 4K traced (run-ktrace.sh),
#      unless KTRACE=none.
# From the repository root; logs to $OUT.
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"; D=$R/devrun/ml
cd "$D" && gunzip -f cuda.test.gz && chmod +x cuda.test && tar xJf petals.txz && cd "$R"
for m in engine/cuda/kernels/qmv.ptx engine/cuda/kernels/moe.ptx engine/cuda/kernels/route.ptx; do
	/usr/local/cuda/bin/ptxas -arch=sm_90 -v "$m" -o /tmp/k.cubin 2>&1
done > "$O/ptxas.txt"
grep -B1 "bytes stack frame" "$O/ptxas.txt" | grep -v "0 bytes stack frame" | grep -B1 "stack frame" | head -20
export PETAL_CUDA_REQUIRE=1
(cd engine/cuda && timeout 200 "$D/cuda.test" -test.v -test.run "${TESTS:-TestMoELayer|TestMoEMatchesReference|TestNormRouteMatchesApart|TestNormGroupMatchesApart|TestFusedMatchReferences|TestConformance|TestQMV|TestRoute}" > "$O/tests.txt" 2>&1; echo "tests: rc=$?" | tee -a "$O/tests.txt")
grep -E '^(--- FAIL|    --- FAIL|panic|ok|FAIL)' "$O/tests.txt" | head -20
(cd engine/cuda && PETAL_CUDA_BENCH=1 timeout 120 "$D/cuda.test" -test.v -test.run "${PHASES:-TestMeasureMoELayerPhases}" > "$O/phases.txt" 2>&1)
grep -vE '^(=== RUN|    ---|    gpu_test)' "$O/phases.txt" | head -80
for r in $(seq ${ROUNDS:-2}); do
	for run in ${RUNS:-petal-old:cuda petal:cuda petal:cuda:moelayer=one}; do
		p=${run%%:*}; spec=${run#*:}
		echo "==== round $r $p --backend $spec" >> "$O/bench.txt"
		timeout 100 "$D/$p" bench --backend $spec --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths 512 \
			--context-lengths 256,4K,16K --decode-tokens 64 --repeats 3 >> "$O/bench.txt" 2>&1
	done
done
grep -E '^====|^ +[0-9K]+ ' "$O/bench.txt"
[ "$KTRACE" = none ] && exit 0
PETAL=$D/petal TAG=cuda BACKEND=cuda KT_PROMPTS=512 LIMIT=100 bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1
python3 docs/bench/cuda/ktrace/ktsum.py "$O/ktrace-cuda.csv.gz" | tail -16
