#!/bin/bash
# run-group.sh: one GPU session for the grouped one-token mat-vec
# (qmv_group) and the prefill chunk size. Run from the repository root
# with RUN_DIR (default devrun/group) holding petal.xz, cuda.test.gz and
# ref.tgz (as run-pdl.sh). Logs to $OUT: steps.txt, tests.txt (the
# decode kernels, conformance, the oracle), cli.txt (greedy), bench.txt
# (decode at 1 and 4K; prefill at 4K and 16K with --chunk 512, 1024,
# 2048 and 4096, each with its peak device memory), bench-*.json.
set -o pipefail
R=$(pwd)
D=${RUN_DIR:-$R/devrun/group}
O=${OUT:-/tmp/out}
mkdir -p "$O"
cd "$D" || exit 1
[ -f cuda.test.gz ] && gunzip -f cuda.test.gz
[ -f petal.xz ] && xz -d -f petal.xz
chmod +x petal cuda.test
mkdir -p oracle && tar xzf ref.tgz -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
{ date -u; nvidia-smi; ./petal --version; } > "$O/env.txt" 2>&1
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
step() { # log, name, timeout, command...
	local log=$1 name=$2 t=$3
	shift 3
	local s=$(date +%s%N)
	echo "==== $name: $*" >> "$O/$log.txt"
	timeout "$t" "$@" >> "$O/$log.txt" 2>&1
	local rc=$?
	printf '%-22s rc=%-3s %7d ms\n' "$name" "$rc" $((($(date +%s%N) - s) / 1000000)) | tee -a "$O/steps.txt"
}
T=$D/cuda.test
P=$D/petal
cd "$R/engine/cuda"
step tests fused 120 $T -test.v -test.run 'TestFusedMatchReferences|TestConformance/default|TestConformance/fused=off|TestPlainGEMMTiles|TestQMV'
step tests oracle 120 $T -test.v -test.run 'TestOracleOnGPU'
cd "$D"
grep -hE '^(--- |ok|FAIL|PASS)|panic' "$O/tests.txt" | grep -vE '^    --- PASS' | head -40
step cli greedy 30 sh -c "$P run --backend cuda --raw --temperature 0 --max-tokens 48 'def fibonacci(n):'"
step cli greedy-fused-off 30 sh -c "$P run --backend cuda:fused=off --raw --temperature 0 --max-tokens 48 'def fibonacci(n):'"
step bench decode 120 $P bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 8192 --decode-tokens 64 \
	--prompt-lengths 512 --context-lengths 1,4K --out "$O/bench-decode.json"
for c in 512 1024 2048 4096; do
	step bench "chunk-$c" 90 $P bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 16384 --chunk $c \
		--prompt-lengths 4K,16K --context-lengths 1 --decode-tokens 8 --out "$O/bench-chunk$c.json"
done
grep -E '^====|prefill +[0-9]+ tokens|decode at|peak device|kernels/token|^ +(1|4K) ' "$O/bench.txt" | head -60
[ "$(stat -c %s "$O/tests.txt")" -gt 200000 ] && gzip -9 "$O/tests.txt"
exit 0
