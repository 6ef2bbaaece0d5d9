#!/bin/bash
# run-report2.sh: route.cu's tests (its ranking over order keys) and then
# the report (run-report.sh) with every default of 2026-12-01 evening
# (norms=fused, router=tf32) and their two switches added to the
# ablations. From the repository root, with devrun/route2t/cuda.test.gz and
# devrun/report/petal.xz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c
# -ldflags='-s -w' ./engine/cuda; go build -ldflags='-s -w' .).
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"
(cd devrun/route2t && gunzip -f cuda.test.gz && chmod +x cuda.test)
(cd engine/cuda && PETAL_CUDA_REQUIRE=1 timeout 100 "$R/devrun/route2t/cuda.test" -test.v \
	-test.run 'TestRoute|TestNormRouteMatchesApart|TestFusedMatchReferences|TestConformance/default' > "$O/tests.txt" 2>&1
	echo "tests: rc=$?" | tee -a "$O/tests.txt")
grep -E '^(--- FAIL|    --- FAIL|panic)' "$O/tests.txt" | head
(cd devrun/report && xz -d -f petal.xz && chmod +x petal)
PETAL=$R/devrun/report/petal LIMIT=${LIMIT:-470} \
	ABLATE=${ABLATE-graphs=off,fused=off,attn=plain,delta=sequential,gemm=plain,qmv=fast,kv=bf16,pdl=on,norms=apart,router=plain} \
	bash docs/bench/cuda/run-report.sh
