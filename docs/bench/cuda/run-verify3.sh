#!/bin/bash
# run-verify3.sh: main's CUDA tests on the GPU machine, the oracle's too.
# devrun/ml holds cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go
# test -c -ldflags='-s -w' ./engine/cuda) and ref.txz (tar cJf ref.txz -C
# ../shared/oracle reference). From the repository root; logs to $OUT.
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"; D=$R/devrun/ml
cd "$D" && gunzip -f cuda.test.gz && chmod +x cuda.test && mkdir -p oracle && tar xf ref.txz -C oracle \
	&& ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit && cd "$R"
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
(cd engine/cuda && timeout 280 "$D/cuda.test" -test.v -test.run "${TESTS:-TestOracleOnGPU|TestConformance|TestFusedMatchReferences|TestNormRouteMatchesApart|TestNormGroupMatchesApart|TestMoE|TestQMV|TestRoute|TestSnapshotRoundTripOnGPU|TestGraphOutlivesBackend}" > "$O/tests.txt" 2>&1; echo "tests: rc=$?" | tee -a "$O/tests.txt")
grep -E '^(--- |panic|ok|FAIL)' "$O/tests.txt" | head -40
grep -E 'top-1|KL|NLL' "$O/tests.txt" | head -20
