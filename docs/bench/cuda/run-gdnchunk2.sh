#!/bin/bash
# run-gdnchunk2.sh: one GPU session for the chunked delta rule in two
# kernels (gdn_chunk_prep, gdn_chunk_state) against the one-pass chunked
# kernel (gdn_chunk; the binary of run gdnchunk2 still had it, timed by
# its TestMeasureDeltaForms; it was removed after) and the sequential one. Run from the repository root with RUN_DIR
# (default devrun/delta) holding cuda.test.gz (CGO_ENABLED=0 GOOS=linux
# GOARCH=amd64 go test -c -ldflags='-s -w' ./engine/cuda) and ref.tgz
# (tar czf ref.tgz -C ../shared/oracle reference). The tests run in
# engine/cuda; TestDeltaChunkKernelMatchesLauncher, which reads the kernel
# sources, runs on the build machine instead. Logs go to $OUT:
#   env.txt    the machine
#   steps.txt  each part's exit status and time
#   tests.txt  the chunked form against the float64 reference (16..512
#              rows, then 4096), the fall-back, the timing of the three
#              forms at 512 and 4096 tokens, conformance, the oracle test
# A failing part does not stop the later ones; each has a timeout, each
# test its own process (a GPU fault ends only its own).
set -o pipefail
R=$(pwd)
D=${RUN_DIR:-$R/devrun/delta}
O=${OUT:-/tmp/out}
mkdir -p "$O"
cd "$D" || exit 1
[ -f cuda.test.gz ] && gunzip -f cuda.test.gz
chmod +x cuda.test
mkdir -p oracle && tar xzf ref.tgz -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
{ date -u; nvidia-smi; nproc; free -g; } > "$O/env.txt" 2>&1
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
cd "$R/engine/cuda"
step tests chunk-reference 40 $T -test.v -test.run 'TestChunkedDeltaRuleMatchesReference'
step tests chunk-4096 45 $T -test.v -test.run 'TestChunkedDeltaRuleLongPrefill'
step tests chunk-fallback 15 $T -test.v -test.run 'TestChunkedDeltaRuleFallsBack|TestDeltaOption'
step tests chunk-timing 25 $T -test.v -test.run 'TestMeasureDeltaForms'
step tests conformance 30 $T -test.v -test.run 'TestConformance'
step tests oracle 30 $T -test.v -test.run 'TestOracleOnGPU'
grep -hE '^(--- |ok|FAIL|PASS)|panic|error .* of the RMS|tokens/ms' "$O/tests.txt" | grep -vE '^    --- PASS' | head -100
exit 0
