#!/bin/bash
# run-routekeys.sh: the decode router's time (TestMeasureMoELayer: 32
# layers in one graph, the router alone and with the experts) with three
# builds of engine/cuda's test binary in devrun/rk: cuda-orig (route.cu
# ranking over floats, commit cc652b6), cuda-keys-inner (order keys
# computed in the ranking's inner loop, the build of run report2) and
# cuda-new (keys computed once per logit); then the router tests with
# cuda-new. From the repository root; logs to $OUT.
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"
cd devrun/rk && gunzip -f *.gz && chmod +x *.test && cd "$R/engine/cuda"
for b in orig keys-inner new orig keys-inner new; do
	echo "==== cuda-$b" >> "$O/measure.txt"
	PETAL_CUDA_REQUIRE=1 PETAL_CUDA_BENCH=1 timeout 100 "$R/devrun/rk/cuda-$b.test" -test.v -test.run '^TestMeasureMoELayer$' >> "$O/measure.txt" 2>&1
done
grep -E '^====|route|router' "$O/measure.txt" | head -40
PETAL_CUDA_REQUIRE=1 timeout 100 "$R/devrun/rk/cuda-new.test" -test.v -test.run 'TestRoute|TestNormRouteMatchesApart|TestFusedMatchReferences|TestConformance/default' > "$O/tests.txt" 2>&1
echo "tests: rc=$?" | tee -a "$O/tests.txt"
grep -E '^(--- FAIL|    --- FAIL|panic)' "$O/tests.txt" | head
