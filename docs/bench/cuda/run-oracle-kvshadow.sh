#!/bin/bash
# run-oracle-kvshadow.sh: the oracle (TestOracleOnGPU) under the defaults
# and kvshadow=on, and TestKVShadow, for kvshadow=on's default. From the
# repository root; devrun/ko holds cuda.test.xz and ref.txz (the oracle's
# reference, as verify13 carried it). Logs in $OUT/oracle.tgz.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/ko; mkdir -p "$O" /tmp/o
. docs/bench/cuda/lib.sh
gpu_env "$O/env.txt"
unpack_oracle "$D" "$R"
cd $R/engine/cuda
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
timeout 240 $D/cuda.test -test.v -test.run 'TestOracleOnGPU/(defaults|kvshadow)|TestKVShadow' > /tmp/o/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' /tmp/o/tests.txt | head -12
grep -E 'top-1|KL|shadow' /tmp/o/tests.txt | head -20
tar czf $O/oracle.tgz -C /tmp/o .
