#!/bin/bash
# run-backend.sh: one GPU session for the CUDA backend. Run from the
# repository root as bash devrun/cuda/run.sh, next to (in devrun/cuda/)
# petal.gz and cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64,
# go build -ldflags=-s\ -w . and go test -c ./engine/cuda), ref.tgz (the
# oracle's reference/ folder) and the PTX of ops.cu and sample.cu. The
# model of the oracle is the tracked fixture. Logs go to $OUT.
#   1. ptxas resource report of the new kernels
#   2. a smoke run of the CLI with sync=op (a GPU error names its op)
#   3. the tests, one process per group (a GPU fault ends its process)
#   4. petal oracle --backend cuda (f32 and bf16 KV)
#   5. petal bench --synthetic qwen3.6-35b-a3b
set -o pipefail
R=$(pwd)
D=$R/devrun/cuda
O=${OUT:-/tmp/out}
mkdir -p "$O"
cd "$D"
gunzip -f petal.gz cuda.test.gz
chmod +x petal cuda.test
mkdir -p oracle && tar xzf ref.tgz -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
{ date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv; nproc; free -g; } > "$O/env.txt" 2>&1
for f in ops sample; do
	echo "== ptxas -arch=sm_90 -O3 -v $f.ptx"
	ptxas -arch=sm_90 -O3 -v -o $f.cubin $f.ptx
done >> "$O/env.txt" 2>&1
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
# At most 8 files come back: each step appends to the log of its group.
step() { # group, name, timeout, command...
	local group=$1 name=$2 t=$3
	shift 3
	local s=$(date +%s%N)
	echo "==== $name: $*" >> "$O/$group.txt"
	timeout "$t" "$@" >> "$O/$group.txt" 2>&1
	local rc=$?
	printf '%-14s rc=%-3s %6d ms\n' "$name" "$rc" $((($(date +%s%N) - s) / 1000000)) | tee -a "$O/steps.txt"
}
step cli smoke 40 ./petal run --backend cuda:sync=op,verbose=on --max-tokens 16 "def fibonacci(n):"
step tests conf-default 60 ./cuda.test -test.v -test.run 'TestConformance/default|TestParseOptions'
step tests conf-nographs 60 ./cuda.test -test.v -test.run 'TestConformance/graphs=off'
step tests conf-plain 60 ./cuda.test -test.v -test.run 'TestConformance/fused=off'
step tests fused 40 ./cuda.test -test.v -test.run 'TestFusedMatchReferences'
step tests oracle-test 90 ./cuda.test -test.v -test.run 'TestOracleOnGPU'
step cli oracle-f32 45 ./petal oracle --backend cuda --oracle "$D/oracle"
step cli oracle-bf16 45 ./petal oracle --backend cuda:kv=bf16 --oracle "$D/oracle"
step cli greedy 30 ./petal run --backend cuda --raw --temperature 0 --max-tokens 32 "def fibonacci(n):"
grep -hE '^(--- |ok|FAIL|PASS)|panic' "$O/tests.txt" | head -40
nvidia-smi --query-gpu=timestamp,clocks.sm,memory.used,power.draw,utilization.gpu --format=csv -lms 500 > "$O/smi.txt" 2>&1 &
SMI=$!
step bench bench ${BENCH_TIMEOUT:-200} ./petal bench --backend cuda:verbose=on --synthetic qwen3.6-35b-a3b --max-context 8192 \
	--prompt-lengths 512,4K --context-lengths 1,4K --decode-tokens 32 --profile --out "$O/bench.json"
# ablations of decode (and prefill at 512): one switch off each
for sw in graphs=off fused=off kv=bf16 qmv=fast; do
	step bench "bench-$sw" 90 ./petal bench --backend cuda:$sw --synthetic qwen3.6-35b-a3b --max-context 8192 \
		--prompt-lengths 512 --context-lengths 1,4K --decode-tokens 32
done
kill $SMI
grep -vE '^(cuda: compiled|building)' "$O/bench.txt" | tail -60
