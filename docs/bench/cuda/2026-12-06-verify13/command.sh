#!/bin/bash
# From the repository root on the GPU machine (the H100 of deltacl1, warm),
# carry ["devrun/ml"] (cuda.test.xz of 40bf316 with the oracle's setting
# "router=i8,gdnnorm=cluster,delta=cluster,moefit=on", and ref.txz). Logs in tests.tgz.
cd devrun/ml && xz -dc cuda.test.xz > cuda.test && chmod +x cuda.test && mkdir -p oracle && tar xf ref.txz -C oracle && ln -sfn $PWD/../../fixtures/tiny-qwen36-moe-4bit oracle/tiny-qwen36-moe-4bit
cd ../../engine/cuda && export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$PWD/../../devrun/ml/oracle && mkdir -p /tmp/o
for tg in 'delta:TestDelta|TestChunkedDelta|TestGDNMatchesReference' 'conformance:TestConformance' 'router:TestRouterTensorCores' \
  'gemm:TestGEMMDenseMatchesReference|TestMoEGroupedMatchesReference|TestGEMMWGModule|TestGEMMGroupArgsMatchKernel' 'oracle:TestOracleOnGPU'; do
  n=${tg%%:*}; timeout 200 ../../devrun/ml/cuda.test -test.v -test.run "${tg#*:}" > /tmp/o/tests-$n.txt 2>&1; echo "tests $n: rc=$?"
done
tar czf $OUT/tests.tgz -C /tmp/o .
