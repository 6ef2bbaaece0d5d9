#!/bin/bash
# run-gl2.sh: after run-gl1.sh (2026-12-07-gl1), on the cubins it made (now
# built in): the two tests it found wrong in themselves (TestGDNLayerOut's
# QLinearGroup took the output projection too; TestDecodeFormsEngage read
# a state never run), the oracle under moelayer=cluster,gdnlayer=out,
# attnout=on (moelayer=cluster now leaves a MoE block no decode MoE kernel
# takes, the embedded model's, to the plain kernels as the defaults do),
# gdnlayer=cluster6 and cluster7 (gdn_layer_nb.cu: clusters of 6 and 7
# blocks, so that all 16 fit at once), gdn_layer and attn_out again (their
# projection loops now shared with gdn_layer_nb, so their gl1 cubins went;
# ptxas makes the three families' cubins into a copy of the built-in ones,
# /tmp/s1, kept in sass.tgz), and decode at 4K and 32K
# (prefill of 512) under the default, attnout=on alone, cluster6,
# cluster7 and out6 (the output projection in the launch too), one round.
# From the repository root; $CARRY (default devrun/gl2) holds petals.txz
# (petal, -tags nofixture),
# cuda.test.xz and ref.txz, built as run-gl1.sh says (without
# driver.test.xz); the tree may go without its logs and PTX but
# gdn_layer.ptx, gdn_layer_nb.ptx, attn_out.ptx and clock/.
# Then TestMeasurePhases (phase.cu's new register forms) and
# TestMeasureSplitReduce (the sums spread over 8 and 32 copies too);
# attnsplit=on and gdnsplit=on,splitcopies=8 tested and benched too. About
# 6 minutes;
# SKIP_ORACLE=1, SKIP_PHASES=1, TESTS (a -test.run pattern) and
# BENCHES (the --backend specs, default the five above) shorten it.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/gl2}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
for fam in gdn_layer gdn_layer_nb attn_out; do
  P=engine/cuda/kernels/$fam.ptx
  /usr/local/cuda/bin/ptxas -arch=sm_90 -O3 -v $P -o /tmp/s1/$fam.sm_90.cubin > $O/ptxas-$fam.txt 2>&1 && gzip -9 -n -f /tmp/s1/$fam.sm_90.cubin &&
    echo "$fam sm_90 $(sha256sum $P | cut -d' ' -f1) $(/usr/local/cuda/bin/ptxas --version | grep -oE 'V[0-9.]+' | head -1)" >> /tmp/s1/manifest.txt
  echo "$fam cubin: rc=$?; $(grep -E 'registers|spill' $O/ptxas-$fam.txt | tr '\n' ' ' | cut -c1-300)"
done
(cd /tmp && tar czf $O/sass.tgz s1/gdn_layer.sm_90.cubin.gz s1/gdn_layer_nb.sm_90.cubin.gz s1/attn_out.sm_90.cubin.gz s1/manifest.txt)
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 timeout 120 $D/cuda.test -test.v \
  -test.run "${TESTS:-TestGDNLayerOutMatchesApart|TestDecodeFormsEngage|TestGDNLayerNBMatchesApart|TestGDNLayerClusterMatchesApart|TestAttnOutMatchesApart|TestCubinsLoad|TestGDNSplitMatchesApart|TestAttnSplitMatchesApart}" > $O/tests.txt 2>&1)
echo "tests: rc=$?"; grep -E -- '^--- |_test.go:[0-9]+: (gdn_layer|decode step)|FAIL' $O/tests.txt | head -20
if [ -z "${SKIP_ORACLE:-}" ]; then
  (cd engine/cuda && PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 120 $D/cuda.test -test.v \
    -test.run 'TestOracleOnGPU/moelayer=cluster,gdnlayer=out,attnout=on$' > $O/oracle.txt 2>&1)
  echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -8; grep -E 'top-1' $O/oracle.txt | head -6
fi
# the phase boundaries (phase.cu, PTX: its cubin is stale), the forms with
# the next phase's row in registers among them
if [ -z "${SKIP_PHASES:-}" ]; then
  (cd engine/cuda && PETAL_CUDA_BENCH=1 timeout 90 $D/cuda.test -test.v -test.run 'TestMeasurePhases$|TestMeasureSplitReduce$' > $O/phases.txt 2>&1)
  echo "phases: rc=$?"; grep -E 'µs a phase|µs a launch|FAIL|phases,' $O/phases.txt
fi
echo "tests: $(( $(date +%s) - start )) s"
for be in ${BENCHES:-cuda cuda:gdnlayer=cluster6 cuda:gdnlayer=cluster7 cuda:gdnlayer=out6 cuda:attnout=on cuda:attnsplit=on cuda:gdnsplit=on,splitcopies=8}; do
  PETAL_CUDA_SASS=/tmp/s1 BENCH_LIMIT=50 bench_run $D/petal $O "1-$(tag_of $be)" $be --max-context 40000 \
    --prompt-lengths 512 --context-lengths 4K,32K --decode-tokens 64 --floors=false
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
