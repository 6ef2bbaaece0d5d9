#!/bin/bash
# run-stout1.sh: the variant `stout` (gemm.cu's GEMM_RA_STAGED_OUT=1: the
# register-A tiles' bf16 outputs, gate/up's SwiGLU and the down GEMM's bf16
# expert outputs, stored transposed by stmatrix into shared memory and
# copied out in 16-byte stores, not one 2-byte store an output) on cubins
# of its own PTX: the MoE and GEMM tests and conformance (tests-stout.txt),
# TestMeasureGEMM of main and of the variant (gemm-main.txt,
# gemm-stout.txt: the MoE's gate/up and down at 512 to 16384 tokens), and
# prefill of 512 / 4K / 16K tokens against main in ROUNDS (default 2)
# alternating rounds.
# From the repository root; $CARRY (default devrun/so): cuda.test.xz and
# petals.txz (petal, petal-stout) of main, ptx-stout.txz and
# cuda-stout.test.xz:
#   C=$(bash docs/bench/cuda/variant-pack.sh devrun/so stout GEMM_RA_STAGED_OUT=1)
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/so petal=HEAD petal-stout=$C
# and the tree's logs, results, PTX and tokenizer test data left out of the
# call. About 5 minutes. Logs in $OUT: logs.tgz, ptxas.tgz, sass.tgz (the
# variant's cubins).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/so}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
variant_cubins $D stout $O
(cd /tmp && tar czf $O/sass.tgz s-stout) && (cd $O && tar czf ptxas.tgz stout && rm -rf stout)
echo "cubins: $(( $(date +%s) - start )) s"
cuda_tests /tmp/s-stout $D/cuda-stout.test \
  'TestMoEGroupedMatchesReference|TestMoEMatchesReference|TestGEMMDenseMatchesReference|TestTensorCoreOpsMatchReferences|TestConformance/default$' \
  $O/tests-stout.txt
for v in main stout; do
  if [ $v = main ]; then bin=$D/cuda.test sass=''; else bin=$D/cuda-stout.test sass=/tmp/s-stout; fi
  (cd engine/cuda && PETAL_CUDA_SASS=$sass PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 150 $bin -test.v \
    -test.run '^TestMeasureGEMM$' > $O/gemm-$v.txt 2>&1)
  echo "TestMeasureGEMM $v: rc=$?"; grep -E 'moe T=(2048|4096|16384) .*(w160rw|w128rp) ' $O/gemm-$v.txt | sed 's/.*moe T/moe T/' | cut -c1-190
done
echo "tests: $(( $(date +%s) - start )) s"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for run in petal:s1 petal-stout:s-stout; do
    b=${run%%:*} s=${run#*:}
    PETAL_CUDA_SASS=/tmp/$s BENCH_LIMIT=60 bench_run $D/$b $O "$round-$b" cuda --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  done
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
