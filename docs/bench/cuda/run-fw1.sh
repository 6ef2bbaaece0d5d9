#!/bin/bash
# run-fw1.sh: three prefill forms written after report20, on their first
# run, each a switch of the same build:
# - delta=tf32frag (gdn_chunk_frag.cu: the prep writing the workspace in
#   the tensor cores' fragment order, rounded to tf32, so that the state
#   pass reads a fragment with one load);
# - moefit=width (gemm_fitw.cu: w160rw, each MoE tile's products as wide
#   as its live rows, 64 to 160, chosen once a block);
# - gemm=wgrs (gemm_ws.cu: w256rs, the large dense GEMMs' copies issued by
#   a producer warp, the stages handed over by mbarriers).
# ptxas makes their cubins into a copy of the built-in ones (/tmp/s1, kept
# in sass.tgz); on them TestChunkedDeltaFragMatchesTF32 (bit for bit
# against delta=tf32, and the reference's bar), TestMoEGroupedMatchesReference
# (w160rw among the MoE's tiles at 2048 and 4096 tokens: 64 to 160 rows
# wide), the launcher's and the modules' checks, and the oracle under each;
# TestMeasureDeltaForms (every state kernel at 512 and 4096 tokens, the
# prep included); prefill of 512 / 4K / 16K tokens, three runs a length,
# under the defaults, each switch and all three, in two alternating rounds;
# then Nsight Compute's per-instruction stalls of two register-A GEMMs.
# Two calls on the same build, too long for one: PART=1 (the default) the
# cubins, tests, oracle and TestMeasureDeltaForms; PART=2 the cubins again,
# the prefill rounds, TestMeasureGEMM of the new tiles and Nsight Compute.
# From the repository root; $CARRY (default devrun/fw) holds petals.txz
# (petal, -tags nofixture), cuda.test.xz and ref.txz; the tree may go
# without its logs and PTX but gdn_chunk_frag.ptx, gemm_fitw.ptx, gemm_ws.ptx
# and phase.ptx. About
# 3 + 5 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/fw}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
new_cubin /tmp/s1 gdn_chunk_frag $O
new_cubin /tmp/s1 gemm_fitw $O
new_cubin /tmp/s1 gemm_ws $O
cubin_into /tmp/s1 phase engine/cuda/kernels/phase.ptx && echo "phase cubin remade"  # stale since before this run (a measurement family)
(cd /tmp && tar czf $O/sass.tgz s1/gdn_chunk_frag.sm_90.cubin.gz s1/gemm_fitw.sm_90a.cubin.gz s1/gemm_ws.sm_90a.cubin.gz s1/phase.sm_90.cubin.gz s1/manifest.txt)
if [ "${PART:-1}" = 1 ]; then
cuda_tests /tmp/s1 $D/cuda.test "${TESTS:-TestChunkedDeltaFragMatchesTF32|TestDeltaChunkKernelMatchesLauncher|TestMoEGroupedMatchesReference|TestGEMMProducerMatchesUndrained|TestGEMMWGModule|TestGEMMTilesFit|TestCubinsLoad}" $O/tests.txt
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 100 $D/cuda.test -test.v \
  -test.run 'TestOracleOnGPU/(defaults|delta=tf32frag|moefit=width|gemm=wgrs)$' > $O/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -4; grep -E 'top-1' $O/oracle.txt | cut -c1-200 | head -15
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_BENCH=1 timeout 150 $D/cuda.test -test.v -test.run '^TestMeasureDeltaForms$' > $O/measure.txt 2>&1)
echo "measure: rc=$?"; grep -E 'delta rule' $O/measure.txt | sed 's/.*delta rule, //' | head -20
echo "tests: $(( $(date +%s) - start )) s"
else
PETAL_CUDA_SASS=/tmp/s1 prefill_rounds $D/petal $O cuda cuda:delta=tf32frag cuda:moefit=width cuda:gemm=wgrs cuda:delta=tf32frag,moefit=width,gemm=wgrs
echo "benches: $(( $(date +%s) - start )) s"
# the new tiles beside the ones they stand for, kernel by kernel
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_BENCH=1 PETAL_MEASURE_TILES=w160rp,w160rw,w256rp,w256rs timeout 200 \
  $D/cuda.test -test.v -test.run '^TestMeasureGEMM$' > $O/measure-gemm.txt 2>&1)
echo "TestMeasureGEMM: rc=$?"; grep -E "^ *gemm_test.go:[0-9]+: (dense|moe T=4096)" $O/measure-gemm.txt | cut -c1-220 | head -20
# Where the register-A GEMMs' warps stall, instruction by instruction (the
# SASS with its sampled stalls, ncu's source page): the dense w256rp at
# 4096 rows (TestMeasureGEMM's launch 24) and gate/up on w160rp at 4096
# tokens (launch 141), for the next step on those tiles.
for spec in gemm_dense_w256rp:23 gemm_gateup_w160rp:140; do
  k=${spec%%:*} skip=${spec#*:}
  (cd engine/cuda && PETAL_CUDA_BENCH=1 timeout 120 ncu --kill yes --kernel-name $k --launch-skip $skip --launch-count 1 \
    --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
    $D/cuda.test -test.run '^TestMeasureGEMM$' > $O/sass-stalls-$k.csv 2>&1)
  echo "ncu source $k: rc=$? $(wc -l < $O/sass-stalls-$k.csv) lines"
done
fi
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
