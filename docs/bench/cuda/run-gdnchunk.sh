#!/bin/bash
# run-gdnchunk.sh: one GPU session for the chunked delta rule of prefill
# (delta=chunked, gdn_chunk.cu) against the sequential kernel (the
# default). Run from the repository root as bash devrun/gdnchunk/run.sh,
# next to (in devrun/gdnchunk/) petal.gz and cuda.test.gz (CGO_ENABLED=0
# GOOS=linux GOARCH=amd64, go build -ldflags=-s\ -w . and go test -c
# -ldflags=-s\ -w ./engine/cuda). Logs go to $OUT:
#   env.txt    the machine
#   steps.txt  each part's exit status and time
#   tests.txt  the chunked kernel's tests (reference, fallback, timing of
#              both forms) and the conformance suite with delta=chunked
#   bench.txt  petal bench at 512 and 4K tokens, delta=sequential and
#              delta=chunked, with --profile (the delta rule's share)
#   bench-seq.json, bench-chunked.json
# A failing part does not stop the later ones; each has a timeout.
set -o pipefail
R=$(pwd)
D=${RUN_DIR:-$R/devrun/gdnchunk}
O=${OUT:-/tmp/out}
mkdir -p "$O"
cd "$D" || exit 1
for f in petal.gz cuda.test.gz; do [ -f $f ] && gunzip -f $f; done
chmod +x petal cuda.test
{ date -u; nvidia-smi; nproc; free -g; } > "$O/env.txt" 2>&1
export PETAL_CUDA_REQUIRE=1
step() { # log, name, timeout, command...
	local log=$1 name=$2 t=$3
	shift 3
	local s=$(date +%s%N)
	echo "==== $name: $*" >> "$O/$log.txt"
	timeout "$t" "$@" >> "$O/$log.txt" 2>&1
	local rc=$?
	printf '%-22s rc=%-3s %7d ms\n' "$name" "$rc" $((($(date +%s%N) - s) / 1000000)) | tee -a "$O/steps.txt"
}
# the reference first, each test in its own process (a GPU fault ends only its own)
step tests chunk-reference 120 ./cuda.test -test.v -test.run 'TestChunkedDeltaRuleMatchesReference'
step tests chunk-fallback 30 ./cuda.test -test.v -test.run 'TestChunkedDeltaRuleFallsBack|TestDeltaOption|TestDeltaChunkKernelMatchesLauncher'
step tests chunk-timing 60 ./cuda.test -test.v -test.run 'TestMeasureDeltaForms'
step tests conformance 90 ./cuda.test -test.v -test.run 'TestConformance|TestFusedMatchReferences'
grep -hE '^(--- |ok|FAIL|PASS)|panic|error .* of the RMS|tokens/ms' "$O/tests.txt" | head -80
step cli smoke-chunked 60 ./petal run --backend cuda:delta=chunked,sync=op,verbose=on --max-tokens 16 "def fibonacci(n):"
for g in sequential chunked; do
	step cli greedy-$g 30 sh -c "./petal run --backend cuda:delta=$g --raw --temperature 0 --max-tokens 48 'def fibonacci(n):' > greedy-$g.txt && cat greedy-$g.txt"
done
if [ -s greedy-chunked.txt ] && cmp -s greedy-sequential.txt greedy-chunked.txt; then
	echo "greedy: delta=sequential and delta=chunked give the same text" | tee -a "$O/cli.txt"
else
	echo "greedy: delta=sequential and delta=chunked differ (or one failed)" | tee -a "$O/cli.txt"
fi
B="./petal bench --synthetic qwen3.6-35b-a3b --max-context 8192 --decode-tokens 8 --prompt-lengths 512,4K --context-lengths 1 --profile"
step bench bench-seq 120 $B --backend cuda:delta=sequential --out "$O/bench-seq.json"
step bench bench-chunked 120 $B --backend cuda:delta=chunked --out "$O/bench-chunked.json"
grep -vE '^(cuda: compiled|building)' "$O/bench.txt" | grep -E 'prefill|delta|====' | head -40
