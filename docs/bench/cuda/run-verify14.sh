#!/bin/bash
# run-verify14.sh: kvshadow=on as the default (88f8555 on): the engine/cuda
# tests the default touches (conformance under every setting, the fused and
# flash attention cases with the shadow, the snapshot round trip,
# TestKVShadow, the attention kernels; TESTS=Test for all but the
# TestMeasure* timings), then petal run on the checkout's tiny model and petal
# inspect with the GPU present. From the repository root; devrun/vd holds
# cuda.test.xz and petal.xz (-tags nofixture); SKIP: tests left out
# (default the TestMeasure* timings). Logs in $OUT/verify.tgz.
R=$(pwd); O=/tmp/v; D=$R/devrun/vd; mkdir -p "$O" "${OUT:-/tmp/out}"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda
# ${TESTS:-...}: the tests the default touches (all but the timings: TESTS=Test)
PETAL_CUDA_REQUIRE=1 timeout ${LIMIT:-240} $D/cuda.test -test.v -test.run "${TESTS:-TestConformance|TestFusedMatchReferences|TestFlashAttnInBackend|TestKVShadow|TestSnapshotRoundTripOnGPU|TestKVToBF16|TestAttnMatchesReference|TestOracleOnGPU}" -test.skip "${SKIP:-TestMeasure}" > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- FAIL|ok|FAIL|PASS)|panic' $O/tests.txt | head -20
echo "top-level: $(grep -c '^--- PASS' $O/tests.txt) passed, $(grep -c '^--- FAIL' $O/tests.txt) failed, $(grep -c '^--- SKIP' $O/tests.txt) skipped"
grep -E -- '--- FAIL' $O/tests.txt | head -20
cd $R
timeout 60 $D/petal run --model fixtures/tiny-qwen36-moe-4bit --backend cuda:verbose=on --max-tokens 8 "Hi" > $O/run.txt 2>&1; echo "petal run: rc=$?"
timeout 60 $D/petal inspect --model fixtures/tiny-qwen36-moe-4bit --context 131072 > $O/inspect.txt 2>&1; echo "petal inspect: rc=$?"; grep -E 'device memory|GPU' $O/inspect.txt
tar czf ${OUT:-/tmp/out}/verify.tgz -C /tmp v
