#!/bin/bash
# The command of run report1 (devrun/report/go.sh): the GPU tests, then
# docs/bench/cuda/run-report.sh with LIMIT=400, over binaries built from
# commit ea5816c (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build
# -ldflags='-s -w' ., go test -c ./engine/cuda), ref.tgz the oracle's
# reference folder.
R=$(pwd); D=$R/devrun/report; O=${OUT:-/tmp/out}; mkdir -p "$O"
cd "$D" && xz -d -f petal.xz && gunzip -f cuda.test.gz && chmod +x petal cuda.test
mkdir -p oracle && tar xzf ref.tgz -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
cd "$R/engine/cuda"
for pat in 'TestFusedMatchReferences|TestConformance/default|TestQMV|TestPlainGEMMTiles|TestGraphOutlivesBackend' 'TestChunkedDelta|TestDelta|TestMeasureDeltaForms' 'TestOracleOnGPU'; do
	s=$(date +%s)
	echo "==== $pat" >> "$O/tests.txt"
	timeout 120 "$D/cuda.test" -test.v -test.run "$pat" >> "$O/tests.txt" 2>&1
	echo "$pat: rc=$? $(( $(date +%s) - s )) s" | tee -a "$O/tests.txt"
done
cd "$R"
PETAL=$D/petal LIMIT=${LIMIT:-400} bash docs/bench/cuda/run-report.sh
