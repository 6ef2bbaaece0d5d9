#!/bin/bash
# run-report18.sh: delta=tf32 as the default checked, then the report on it.
# First the tests the new default touches, on the built-in cubins
# (tests.txt): TestCubinsLoad, conformance under the defaults, the chunked
# delta rule's tests (the float32-accurate form now named delta=chunked,
# the one-product form at its bar), and the oracle under the defaults and
# under delta=chunked (oracle.txt). Then run-report16.sh with delta=chunked
# among the ablations. From the repository root; $CARRY (default devrun/rp)
# holds cuda.test.xz and ref.txz for the tests (devrun-pack.sh with
# TEST=HEAD, then tar cJf ref.txz -C ../shared/oracle reference), and/or
# petals.txz (petal and petal-old, -tags nofixture) for the report: each
# part runs where its files came (the two together pass the call's 64 MiB,
# so they may come in two calls on the same machine). TESTS (a -test.run
# pattern) and ORACLE_RUN (the oracle's specs, a regexp) name other tests.
# About 2 + 3 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/rp}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
if [ -f "$D/cuda.test.xz" ]; then
unpack_oracle "$D" "$R"
gpu_env "$O/env-tests.txt"
(cd engine/cuda && PETAL_CUDA_REQUIRE=1 timeout 150 $D/cuda.test -test.v \
  -test.run "${TESTS:-TestCubinsLoad|TestConformance/default\$|TestDeltaOption|TestDeltaChunkKernelMatchesLauncher|TestChunkedDelta}" > $O/tests.txt 2>&1)
echo "tests: rc=$?"; grep -E '^(--- FAIL|FAIL|ok|PASS)|panic' $O/tests.txt | head -12
echo "top-level: $(grep -c '^--- PASS' $O/tests.txt) passed, $(grep -c '^--- FAIL' $O/tests.txt) failed"
(cd engine/cuda && PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 100 $D/cuda.test -test.v \
  -test.run "TestOracleOnGPU/(${ORACLE_RUN:-defaults|delta=chunked})\$" > $O/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -12; grep -E 'top-1' $O/oracle.txt | cut -c1-200 | head -10
echo "tests: $(( $(date +%s) - start )) s"
fi
[ -f "$D/petals.txz" ] && CARRY=${CARRY:-devrun/rp} LIMIT=${LIMIT:-220} ABLATE=${ABLATE-delta=chunked,kvshadow=off,kv=bf16} bash docs/bench/cuda/run-report16.sh
echo "all: $(( $(date +%s) - start )) s"
