#!/bin/bash
# run-lean1.sh: the variant `lean` (gemm.cu's GEMM_RA_LEAN_OUT=1: the
# register-A tiles' float32 outputs, the dense GEMMs' and the float32 down
# GEMM's, stored through two pointers stepped 8 rows a time, not each
# store with its own 64-bit row times N) on cubins of its own PTX: the
# GEMM and MoE tests and conformance (tests-lean.txt), TestMeasureGEMM of
# main and of the variant (gemm-main.txt, gemm-lean.txt: the dense shapes
# at 512 to 4096 rows), and prefill of 512 / 4K / 16K tokens against main
# in ROUNDS (default 3) alternating rounds. TESTS (a regexp) narrows the
# tests.
# From the repository root; $CARRY (default devrun/ln): cuda.test.xz and
# petals.txz (petal, petal-lean) of main, ptx-lean.txz and
# cuda-lean.test.xz:
#   C=$(bash docs/bench/cuda/variant-pack.sh devrun/ln lean GEMM_RA_LEAN_OUT=1)
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/ln petal=HEAD petal-lean=$C
# and the tree's logs, results, PTX and tokenizer test data left out of the
# call. About 5 minutes. Logs in $OUT: logs.tgz, ptxas.tgz, sass.tgz (the
# variant's cubins).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/ln}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
variant_cubins $D lean $O
(cd /tmp && tar czf $O/sass.tgz s-lean) && (cd $O && tar czf ptxas.tgz lean && rm -rf lean)
echo "cubins: $(( $(date +%s) - start )) s"
cuda_tests /tmp/s-lean $D/cuda-lean.test \
  "${TESTS:-TestMoEGroupedMatchesReference|TestMoEMatchesReference|TestGEMMDenseMatchesReference|TestGEMMGroupSplitMatchesReference|TestTensorCoreOpsMatchReferences|TestConformance/default\$}" \
  $O/tests-lean.txt
for v in main lean; do
  if [ $v = main ]; then bin=$D/cuda.test sass=''; else bin=$D/cuda-lean.test sass=/tmp/s-lean; fi
  (cd engine/cuda && PETAL_CUDA_SASS=$sass PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 150 $bin -test.v \
    -test.run '^TestMeasureGEMM$' > $O/gemm-$v.txt 2>&1)
  echo "TestMeasureGEMM $v: rc=$?"; grep -E 'dense (q_proj|in_proj_z|o_proj)' $O/gemm-$v.txt | sed 's/.*dense/dense/' | grep -oE '^dense [a-z_]+ [0-9x]+ +M=[0-9]+|w256rp +[0-9.]+ µs|w128rp +[0-9.]+ µs' | paste -d' ' - - -
done
echo "tests: $(( $(date +%s) - start )) s"
for round in $(seq 1 "${ROUNDS:-3}"); do
  for run in petal:s1 petal-lean:s-lean; do
    b=${run%%:*} s=${run#*:}
    PETAL_CUDA_SASS=/tmp/$s BENCH_LIMIT=60 bench_run $D/$b $O "$round-$b" cuda --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  done
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
