#!/bin/bash
# run-epi1.sh: two forms of the register-A tiles' float32 epilogue (the
# dense GEMMs', the float32 down GEMM's), each a variant on cubins of its
# own PTX, against main:
#   lean   GEMM_RA_LEAN_OUT=1: the stores through two pointers stepped 8
#          rows a time, not each with its own 64-bit row times N
#   stf32  GEMM_RA_STAGED_OUT=2: the outputs staged in shared memory (a
#          4-byte store a value), then 16-byte global stores along rows
# For each: the GEMM and MoE tests and conformance (tests-NAME.txt), then
# TestMeasureGEMM of main and of each (gemm-NAME.txt: the dense shapes at
# 512 and 4096 rows), and prefill of 512 / 4K / 16K tokens in ROUNDS
# (default 2) alternating rounds. TESTS (a regexp) narrows the tests.
# From the repository root; $CARRY (default devrun/ep): cuda.test.xz and
# petals.txz (petal, petal-lean, petal-stf32) of main, ptx-NAME.txz and
# cuda-NAME.test.xz of each:
#   L=$(bash docs/bench/cuda/variant-pack.sh devrun/ep lean GEMM_RA_LEAN_OUT=1)
#   F=$(bash docs/bench/cuda/variant-pack.sh devrun/ep stf32 GEMM_RA_STAGED_OUT=2)
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/ep petal=HEAD petal-lean=$L petal-stf32=$F
# and the tree's logs, results, PTX but the gemm families' and tokenizer
# test data left out of the call. About 4 minutes. Logs in $OUT: logs.tgz,
# ptxas.tgz, sass.tgz (the variants' cubins).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/ep}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
V="lean stf32"
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
for v in $V; do variant_cubins $D $v $O; done
(cd /tmp && tar czf $O/sass.tgz $(for v in $V; do echo s-$v; done)) && (cd $O && tar czf ptxas.tgz $V && rm -rf $V)
echo "cubins: $(( $(date +%s) - start )) s"
for v in $V; do
  cuda_tests /tmp/s-$v $D/cuda-$v.test \
    "${TESTS:-TestMoEGroupedMatchesReference|TestGEMMDenseMatchesReference|TestGEMMGroupSplitMatchesReference|TestTensorCoreOpsMatchReferences|TestConformance/default\$}" \
    $O/tests-$v.txt
done
for v in main $V; do
  if [ $v = main ]; then bin=$D/cuda.test sass=''; else bin=$D/cuda-$v.test sass=/tmp/s-$v; fi
  (cd engine/cuda && PETAL_CUDA_SASS=$sass PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 150 $bin -test.v \
    -test.run '^TestMeasureGEMM$' > $O/gemm-$v.txt 2>&1)
  echo "TestMeasureGEMM $v: rc=$?"
  grep -E 'dense (q_proj|in_proj_z|o_proj)' $O/gemm-$v.txt | sed 's/.*dense/dense/' |
    grep -oE '^dense [a-z_]+ [0-9x]+ +M=[0-9]+|w256rp +[0-9.]+ µs|w128rp +[0-9.]+ µs' | paste -d' ' - - -
done
echo "tests: $(( $(date +%s) - start )) s"
binary_rounds $D $O petal:s1 petal-lean:s-lean petal-stf32:s-stf32
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
