#!/bin/bash
# run-backend.sh: the first run of the Metal backend (engine/metal) through
# the CUDA dialect on an NVIDIA GPU: the conformance suite, the oracle model
# the one-token decode kernels and gemm=simd against the CPU backend, each
# in its own process; then engine/metal/cudarun's kernel tests again, with
# gemm.metal's (run-ops1.sh; prefill attention's bar over 1000 positions is
# new). Run from the repository root
# with RUN_DIR (default devrun/metalbe) holding metal.test.gz and
# cudarun.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c
# -ldflags='-s -w' ./engine/metal and ./engine/metal/cudarun) and ref.tgz
# (tar czf ref.tgz -C ../shared/oracle reference). Logs to $OUT (at most
# eight files: the per-family logs are tarred).
R=$(pwd); D=${RUN_DIR:-$R/devrun/metalbe}; O=${OUT:-/tmp/out}; mkdir -p "$O"
cd "$D" || exit 1
for f in metal.test.gz cudarun.test.gz; do [ -f $f ] && gunzip -f $f; done
chmod +x metal.test cudarun.test
REF=$(ls "$D"/ref.t*z "$R"/devrun/*/ref.t*z 2>/dev/null | head -1) # or an earlier call's, while the machine is warm
mkdir -p oracle && tar xf "$REF" -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > "$O/env.txt" 2>&1
cd "$R/engine/metal"
mkdir -p "$O/cudarun"; export PETAL_CUDARUN_LAUNCHED=$O/cudarun/launched.txt; : > $PETAL_CUDARUN_LAUNCHED
for t in TestConformance TestDecodeKernels TestQLinearGroupDecode TestNormsFusedMatchApart TestSimdGEMMOpsMatchReferences TestOracle; do
	s=$(date +%s)
	echo "==== $t" >> "$O/backend.txt"
	timeout 150 "$D/metal.test" -test.v -test.run "^$t\$" >> "$O/backend.txt" 2>&1
	echo "$t: rc=$? $(( $(date +%s) - s )) s" | tee -a "$O/backend.txt"
done
grep -E '^(--- FAIL|    --- FAIL|panic)' "$O/backend.txt" | head -30
cd "$R"
KEEP_LAUNCHED=1 OUT=$O/cudarun bash docs/bench/metal/run-ops1.sh "$D/cudarun.test" | tail -12
tar czf "$O/cudarun-logs.tgz" -C "$O" cudarun && rm -rf "$O/cudarun"
exit 0
