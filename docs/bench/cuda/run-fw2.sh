#!/bin/bash
# run-fw2.sh: run-fw1.sh's forms again after its failures were mended
# (9f7fe38: delta=tf32frag's prep with gdn_chunk_prep's 3xTF32 products,
# w256rs a dense tile only; then w256rs's consumers arriving at the empty
# barrier without a branch, for which ptxas had serialised its wgmma), in
# one call or two on the same build; gemm=wgr3 (w256r3, three warpgroups
# of weight rows) beside them:
# PART=A: the cubins; the tests that failed in fw1 and the oracle under
#   each form; TestMeasureDeltaForms;
#   TestMeasureGEMM of w160rp, w160rw, w256rp and w256rs; Nsight Compute's
#   per-instruction stalls of the dense w256rp and w256rs and gate/up on
#   w160rp.
# PART=B: the cubins; prefill of 512 / 4K / 16K tokens, three runs a
#   length, under the defaults, each form and all three, two alternating
#   rounds (run-fw1.sh's second part); and, where CARRY has petal-late and
#   ptx-late.txz, the build with GEMM_RA_LATE_LOAD set (the register-A
#   tiles' copies queued after a k-tile's first products, branch-free) on
#   cubins of its own PTX, in each round.
# PART=AB: both in one call, without Nsight Compute.
# PART=AL: A without Nsight Compute, then the GEMM_RA_LATE_LOAD build's
#   test binary (CARRY/cuda-late.test.xz) on cubins of its own PTX: its
#   GEMM tests and TestMeasureGEMM of w128rp, w160rp and w256rp.
# From the repository root; $CARRY (default devrun/fw) as run-fw1.sh's.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/fw}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
new_cubin /tmp/s1 gdn_chunk_frag $O
new_cubin /tmp/s1 gemm_fitw $O
new_cubin /tmp/s1 gemm_ws $O
cubin_into /tmp/s1 phase engine/cuda/kernels/phase.ptx && echo "phase cubin remade"
(cd /tmp && tar czf $O/sass.tgz s1/gdn_chunk_frag.sm_90.cubin.gz s1/gemm_fitw.sm_90a.cubin.gz s1/gemm_ws.sm_90a.cubin.gz s1/phase.sm_90.cubin.gz s1/manifest.txt)
# late_cubins: /tmp/s2, /tmp/s1 with the five families that include
# gemm.cu's tiles made from the GEMM_RA_LATE_LOAD build's PTX
# (CARRY/ptx-late.txz)
late_cubins() {
  (cd $D && tar xJf ptx-late.txz) && mkdir -p $LO
  rm -rf /tmp/s2 && cp -r /tmp/s1 /tmp/s2
  for fam in gemm_wg gemm_fit gemm_downbf gemm_fitw gemm_ws; do new_cubin /tmp/s2 $fam $LO $D/ptx-late/$fam.ptx; done
}
LO=$O/late  # the late build's logs, packed as late.tgz
PART=${PART:-A}
[ "$PART" != A ] && NCU=0
if [ "$PART" != B ]; then
cuda_tests /tmp/s1 $D/cuda.test 'TestChunkedDeltaFragMatchesTF32|TestDeltaChunkKernelMatchesLauncher|TestMoEGroupedMatchesReference|TestGEMMProducerMatchesUndrained|TestGEMMWGModule|TestGEMMTilesFit' $O/tests.txt
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 100 $D/cuda.test -test.v \
  -test.run 'TestOracleOnGPU/(defaults|delta=tf32frag|moefit=width|gemm=wgrs|gemm=wgr3)$' > $O/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^ *--- ' $O/oracle.txt | head -6; grep -E 'top-1' $O/oracle.txt | sed 's/.*: seq/seq/; s/.*: chat/chat/' | cut -c1-150 | head -20
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_BENCH=1 timeout 150 $D/cuda.test -test.v -test.run '^TestMeasureDeltaForms$' > $O/measure.txt 2>&1)
echo "measure: rc=$?"; grep -E 'delta rule' $O/measure.txt | sed 's/.*delta rule, //' | grep -E 'tf32|frag' | head -12
echo "tests: $(( $(date +%s) - start )) s"
pack_out "$O" && mv $O/logs.tgz $O/logs-tests.tgz  # kept should the rest be cut short
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_BENCH=1 PETAL_MEASURE_TILES=w160rp,w160rw,w256rp,w256rs,w256r3 timeout 200 \
  $D/cuda.test -test.v -test.run '^TestMeasureGEMM$' > $O/measure-gemm.txt 2>&1)
echo "TestMeasureGEMM: rc=$?"; grep -E "^ *gemm_test.go:[0-9]+: (dense|moe T=4096)" $O/measure-gemm.txt | cut -c1-220 | head -20
echo "part A: $(( $(date +%s) - start )) s"
pack_out "$O" && mv $O/logs.tgz $O/logs-a.tgz  # kept should part B be cut short
fi
if [ "$PART" = AL ]; then
# the GEMM_RA_LATE_LOAD build (CARRY/cuda-late.test.xz) on its own cubins:
# its GEMM tests, then TestMeasureGEMM of the tiles it changes
xz -dc $D/cuda-late.test.xz > $D/cuda-late.test && chmod +x $D/cuda-late.test && late_cubins
cuda_tests /tmp/s2 $D/cuda-late.test 'TestGEMMDenseMatchesReference|TestGEMMGroupSplitMatchesReference|TestMoEGroupedMatchesReference|TestGEMMProducerMatchesUndrained|TestTensorCoreOpsMatchReferences' $LO/tests-late.txt
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s2 PETAL_CUDA_BENCH=1 PETAL_MEASURE_TILES=w128rp,w160rp,w256rp timeout 200 \
  $D/cuda-late.test -test.v -test.run '^TestMeasureGEMM$' > $LO/measure-gemm-late.txt 2>&1)
echo "TestMeasureGEMM (late): rc=$?"; grep -E "^ *gemm_test.go:[0-9]+: (dense|moe T=4096)" $LO/measure-gemm-late.txt | cut -c1-220 | head -20
echo "late: $(( $(date +%s) - start )) s"
(cd $O && tar czf late.tgz late && rm -rf late)
fi
if [ "$PART" = B ] || [ "$PART" = AB ]; then
late=0
[ -x $D/petal-late ] && [ -f $D/ptx-late.txz ] && late_cubins && late=1
for round in 1 2; do
  for be in cuda cuda:delta=tf32frag cuda:moefit=width cuda:gemm=wgrs cuda:gemm=wgr3 cuda:delta=tf32frag,moefit=width,gemm=wgrs; do
    PETAL_CUDA_SASS=/tmp/s1 BENCH_LIMIT=60 bench_run $D/petal $O "$round-$(tag_of "$be")" "$be" --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  done
  [ $late = 1 ] && PETAL_CUDA_SASS=/tmp/s2 BENCH_LIMIT=60 bench_run $D/petal-late $O "$round-late" cuda --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
done
echo "benches: $(( $(date +%s) - start )) s"
fi
[ -d $LO ] && (cd $O && tar czf late.tgz late && rm -rf late)
pack_out "$O"
# Nsight Compute last (PART=A with NCU=1, the default), its CSVs in a
# tarball of their own, so that a run cut short keeps the logs above.
if [ "${NCU:-1}" = 1 ] && [ "$PART" = A ]; then
mkdir -p $O/ncu
for spec in gemm_dense_w256rp:23 gemm_dense_w256rs:23 gemm_gateup_w160rp:140; do
  k=${spec%%:*} skip=${spec#*:}
  (cd engine/cuda && PETAL_CUDA_BENCH=1 timeout 80 ncu --kill yes --kernel-name $k --launch-skip $skip --launch-count 1 \
    --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
    $D/cuda.test -test.run '^TestMeasureGEMM$' > $O/ncu/sass-stalls-$k.csv 2>&1)
  echo "ncu source $k: rc=$? $(wc -l < $O/ncu/sass-stalls-$k.csv) lines"
done
(cd $O && tar czf ncu.tgz ncu && rm -rf ncu)
fi
echo "all: $(( $(date +%s) - start )) s"
