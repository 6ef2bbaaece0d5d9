#!/bin/bash
# run-prefill.sh: one GPU session for prefill on the tensor cores
# (gemm=tc) against the plain float32 kernels (gemm=plain). Run from the
# repository root as bash devrun/prefill/run.sh, next to (in
# devrun/prefill/) petal.gz and cuda.test.gz (CGO_ENABLED=0 GOOS=linux
# GOARCH=amd64, go build -ldflags=-s\ -w . and go test -c -ldflags=-s\ -w
# ./engine/cuda)
# and ref.tgz (the oracle's reference/ folder); the oracle's model is the
# tracked fixture. Logs go to $OUT, at most 8 files:
#   env.txt    the machine
#   steps.txt  each part's exit status, time and peak device memory
#   tests.txt  the tests, one process per group (a GPU fault ends only its own)
#   cli.txt    a smoke run with sync=op, petal oracle, greedy runs
#   bench.txt  petal bench with gemm=tc (with --profile), gemm=plain, and
#              gemm=tc in chunks of 4096
#   bench-tc.json, bench-plain.json, smi.txt
# A failing part does not stop the later ones; each has a timeout.
set -o pipefail
R=$(pwd)
D=$R/devrun/prefill
O=${OUT:-/tmp/out}
mkdir -p "$O"
cd "$D" || exit 1
gunzip -f petal.gz cuda.test.gz
chmod +x petal cuda.test
mkdir -p oracle && tar xzf ref.tgz -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
{ date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv; nproc; free -g; } > "$O/env.txt" 2>&1
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
# device memory sampled all along; each part's peak goes to steps.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,memory.used,power.draw,utilization.gpu --format=csv,noheader,nounits -lms 200 > "$O/smi.txt" 2>&1 &
SMI=$!
step() { # log, name, timeout, command...
	local log=$1 name=$2 t=$3
	shift 3
	local s=$(date +%s%N) from=$(wc -l < "$O/smi.txt")
	echo "==== $name: $*" >> "$O/$log.txt"
	timeout "$t" "$@" >> "$O/$log.txt" 2>&1
	local rc=$?
	local peak=$(tail -n +"$((from + 1))" "$O/smi.txt" | awk -F', ' 'NF >= 3 && $3 + 0 > m { m = $3 + 0 } END { print m + 0 }')
	printf '%-22s rc=%-3s %7d ms  peak %6s MiB\n' "$name" "$rc" $((($(date +%s%N) - s) / 1000000)) "$peak" | tee -a "$O/steps.txt"
}
step cli smoke-tc 60 ./petal run --backend cuda:gemm=tc,sync=op,verbose=on --max-tokens 16 "def fibonacci(n):"
step tests tc-ops 60 ./cuda.test -test.v -test.run 'TestParseOptions|TestTensorCoreBars|TestTensorCoreOpsMatchReferences'
step tests conformance 60 ./cuda.test -test.v -test.run 'TestConformance|TestFusedMatchReferences'
step tests gemm 45 ./cuda.test -test.v -test.run 'TestGEMM|TestMoEGrouped|TestMoERoute'
step tests oracle 60 ./cuda.test -test.v -test.run 'TestOracleOnGPU'
step cli oracle-tc 40 ./petal oracle --backend cuda:gemm=tc --oracle "$D/oracle"
step cli oracle-plain 40 ./petal oracle --backend cuda:gemm=plain --oracle "$D/oracle"
for g in tc plain; do
	step cli greedy-$g 30 sh -c "./petal run --backend cuda:gemm=$g --raw --temperature 0 --max-tokens 48 'def fibonacci(n):' > greedy-$g.txt && cat greedy-$g.txt"
done
if [ -s greedy-tc.txt ] && cmp -s greedy-tc.txt greedy-plain.txt; then
	echo "greedy: gemm=tc and gemm=plain give the same text" | tee -a "$O/cli.txt"
else
	echo "greedy: gemm=tc and gemm=plain differ (or one failed)" | tee -a "$O/cli.txt"
fi
grep -hE '^(--- |ok|FAIL|PASS)|panic' "$O/tests.txt" | grep -v '^    ' | head -40
B="./petal bench --synthetic qwen3.6-35b-a3b --max-context 16384 --decode-tokens 32"
step bench bench-tc 100 $B --backend cuda:gemm=tc,verbose=on --prompt-lengths 512,4K,16K --context-lengths 1,4K --profile --out "$O/bench-tc.json"
step bench bench-plain 110 $B --backend cuda:gemm=plain --prompt-lengths 512,4K,16K --context-lengths 1,4K --out "$O/bench-plain.json"
step bench bench-tc-chunk4096 50 $B --backend cuda:gemm=tc --chunk 4096 --prompt-lengths 4K,16K --context-lengths 1
kill $SMI
grep -vE '^(cuda: compiled|building)' "$O/bench.txt" | grep -E 'prefill|decode at|====' | head -40
