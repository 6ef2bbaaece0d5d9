#!/bin/bash
R=$(pwd); D=$R/devrun/v2; O=${OUT:-/tmp/out}; mkdir -p "$O/metal"
export PETAL_CUDA_REQUIRE=1
(cd "$R/engine/cuda" && timeout 100 "$D/cuda.test" -test.v -test.run 'TestFusedMatchReferences|TestConformance/default' > "$O/cuda-tests.txt" 2>&1; echo "cuda tests: rc=$?" | tee -a "$O/cuda-tests.txt")
grep -E '^(--- FAIL|    --- FAIL)' "$O/cuda-tests.txt"
OUT=$O/metal bash "$D/run-ops1.sh" "$D/cudarun.test"
grep -h -- '--- FAIL' "$O"/metal/*.log | head
tar czf "$O/metal-logs.tgz" -C "$O" metal && rm -rf "$O/metal"
