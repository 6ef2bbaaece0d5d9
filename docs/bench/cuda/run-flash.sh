#!/bin/bash
# run-flash.sh: one GPU session for the flash prefill attention
# (attn_prefill.cu, --backend cuda:attn=flash) against the plain kernel.
# Run from the repository root as bash devrun/flash/run.sh, next to (in
# devrun/flash/) petal.gz and cuda.test.gz, built beforehand with
# CGO_ENABLED=0 GOOS=linux GOARCH=amd64 (go build -ldflags=-s\ -w . and
# go test -c -ldflags=-s\ -w ./engine/cuda), and a copy of
# engine/cuda/kernels/attn_prefill.ptx. Nothing is built here. Logs go to
# $OUT:
#   env.txt    the machine
#   ptxas.txt  ptxas resource report of the flash kernels (registers, spills)
#   steps.txt  each part's exit status, time and peak device memory
#   tests.txt  the flash tests, then the conformance suite
#   bench.txt  petal bench at 4K and 16K with attn=flash (with --profile) and attn=plain
#   bench-flash.json, bench-plain.json, smi.txt
# A failing part does not stop the later ones; each has a timeout.
set -o pipefail
R=$(pwd)
D=${RUN_DIR:-$R/devrun/flash}
O=${OUT:-/tmp/out}
mkdir -p "$O"
cd "$D" || exit 1
for f in petal.gz cuda.test.gz; do [ -f $f ] && gunzip -f $f; done
chmod +x petal cuda.test
{ date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv; nproc; free -g; } > "$O/env.txt" 2>&1
if command -v ptxas > /dev/null && [ -f attn_prefill.ptx ]; then
	ptxas -arch=sm_90 -O3 -v -o attn_prefill.cubin attn_prefill.ptx > "$O/ptxas.txt" 2>&1
	grep -E "error|Compiling|Used|spill" "$O/ptxas.txt" | paste - - - | sed 's/ptxas info    ://g' | cut -c1-220
else
	echo "no ptxas or no attn_prefill.ptx here: no resource report" > "$O/ptxas.txt"
fi
export PETAL_CUDA_REQUIRE=1
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
step tests flash-kernel 180 ./cuda.test -test.v -test.run 'TestParseAttnOption|TestFlashShapeCheck|TestFlashAttnMatchesReference'
step tests flash-backend 60 ./cuda.test -test.v -test.run 'TestFlashAttnInBackend'
step tests conformance 90 ./cuda.test -test.v -test.run 'TestConformance'
grep -hE '^(--- |ok|FAIL|PASS)|panic|worst' "$O/tests.txt" | head -80
B="./petal bench --synthetic qwen3.6-35b-a3b --max-context 16384 --decode-tokens 8 --context-lengths 1 --prompt-lengths 4K,16K"
step cli smoke-flash 60 ./petal run --backend cuda:attn=flash,sync=op,verbose=on --max-tokens 16 "def fibonacci(n):"
step bench bench-flash 150 $B --backend cuda:attn=flash,verbose=on --profile --out "$O/bench-flash.json"
step bench bench-plain 150 $B --backend cuda:attn=plain --out "$O/bench-plain.json"
kill $SMI
grep -vE '^(cuda: compiled|building)' "$O/bench.txt" | grep -E 'prefill|decode at|====|attn|Attention' | head -40
