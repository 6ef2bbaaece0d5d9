#!/bin/bash
# run-verify17.sh: pdl=on the default (9d57c8a on) and 7ffda47: the oracle
# (TestOracleOnGPU) under the defaults and pdl=some, the attention prep's
# checks five times over (fresh random inputs each: checkPrep's float32 bar
# as it holds since verify16), conformance twice. From the repository root;
# devrun/o9 holds cuda.test.xz and ref.txz (the oracle's reference, as
# devrun/ko carried it). Logs in $OUT/verify.tgz.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/o9}; mkdir -p "$O" /tmp/o
. docs/bench/cuda/lib.sh
gpu_env /tmp/o/env.txt
unpack_oracle "$D" "$R"
cd $R/engine/cuda
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
timeout 300 $D/cuda.test -test.v -test.run 'TestOracleOnGPU/(defaults|pdl=some)$' > /tmp/o/oracle.txt 2>&1
echo "oracle: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' /tmp/o/oracle.txt | head -12
grep -E 'top-1|KL' /tmp/o/oracle.txt | head -12
timeout 120 $D/cuda.test -test.v -test.count 5 -test.run 'TestAttnMatchesReference|TestQKPrepLongPositions' > /tmp/o/attn.txt 2>&1
echo "attn x5: rc=$?; $(grep -c '^--- PASS' /tmp/o/attn.txt) passed, $(grep -c '^--- FAIL' /tmp/o/attn.txt) failed"
grep -oE 'k max error [0-9.e-]+ of max' /tmp/o/attn.txt | sort -t' ' -k4 -g | tail -2
timeout 150 $D/cuda.test -test.v -test.count 2 -test.run 'TestConformance' > /tmp/o/conformance.txt 2>&1
echo "conformance x2: rc=$?; $(grep -c '^--- PASS' /tmp/o/conformance.txt) passed, $(grep -c '^--- FAIL' /tmp/o/conformance.txt) failed"
tar czf $O/verify.tgz -C /tmp/o .
