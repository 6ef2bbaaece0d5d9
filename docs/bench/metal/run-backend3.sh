#!/bin/bash
# run-backend3.sh: the Metal backend's GPU tests again after its weights
# became dispatch.Arg bindings (weights=mapped; the CUDA dialect copies, at
# offset 0): conformance, the decode kernels, the grouped and fused-norm
# kernels, gemm=simd and the oracle, in one process each. From the
# repository root with RUN_DIR (default devrun/metal3) holding metal.test.gz
# (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -ldflags='-s -w'
# ./engine/metal) and ref.t*z of ../shared/oracle/reference. Logs to $OUT.
R=$(pwd); D=${RUN_DIR:-$R/devrun/metal3}; O=${OUT:-/tmp/out}; mkdir -p "$O"
cd "$D" && gunzip -f metal.test.gz && chmod +x metal.test
mkdir -p oracle && tar xf ref.t*z -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
cd "$R/engine/metal"
for t in TestConformance TestDecodeKernels TestQLinearGroupDecode TestNormsFusedMatchApart TestSimdGEMMOpsMatchReferences TestOracle; do
	s=$(date +%s)
	echo "==== $t" >> "$O/backend.txt"
	timeout 150 "$D/metal.test" -test.v -test.run "^$t\$" >> "$O/backend.txt" 2>&1
	echo "$t: rc=$? $(( $(date +%s) - s )) s" | tee -a "$O/backend.txt"
done
grep -E '^(--- FAIL|    --- FAIL|panic)' "$O/backend.txt" | head -30
