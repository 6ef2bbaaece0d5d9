#!/bin/bash
# run-gl2.sh: after run-gl1.sh (2026-12-07-gl1), on the cubins it made (now
# built in): the two tests it found wrong in themselves (TestGDNLayerOut's
# QLinearGroup took the output projection too; TestDecodeFormsEngage read
# a state never run), the oracle under moelayer=cluster,gdnlayer=out,
# attnout=on (moelayer=cluster now leaves a MoE block no decode MoE kernel
# takes, the embedded model's, to the plain kernels as the defaults do),
# and decode at 4K and 32K (prefill of 512) under the default, attnout=on
# alone and gdnlayer=cluster alone, one round. From the repository root;
# $CARRY (default devrun/gl2) holds petals.txz (petal, -tags nofixture),
# cuda.test.xz and ref.txz, built as run-gl1.sh says (without
# driver.test.xz); the tree may go without its logs and PTX but clock/.
# About 4 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/gl2}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
(cd engine/cuda && PETAL_CUDA_REQUIRE=1 timeout 120 $D/cuda.test -test.v \
  -test.run 'TestGDNLayerOutMatchesApart|TestDecodeFormsEngage|TestGDNLayerClusterMatchesApart|TestCubinsLoad' > $O/tests.txt 2>&1)
echo "tests: rc=$?"; grep -E -- '^--- |_test.go:[0-9]+: (gdn_layer|decode step)|FAIL' $O/tests.txt | head -20
(cd engine/cuda && PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 120 $D/cuda.test -test.v \
  -test.run 'TestOracleOnGPU/moelayer=cluster,gdnlayer=out,attnout=on$' > $O/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -8; grep -E 'top-1' $O/oracle.txt | head -6
echo "tests: $(( $(date +%s) - start )) s"
for be in cuda cuda:attnout=on cuda:gdnlayer=cluster; do
  BENCH_LIMIT=50 bench_run $D/petal $O "1-$(tag_of $be)" $be --max-context 40000 \
    --prompt-lengths 512 --context-lengths 4K,32K --decode-tokens 64 --floors=false
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
