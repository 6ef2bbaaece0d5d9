#!/bin/bash
# run-prof3.sh: TestMeasurePhases with the barriers that need no word every
# block adds to (a flag a block; thread-block clusters whose leaders meet
# at flags or a counter; x staged in 16-byte loads), for whether a
# persistent decode kernel could beat a kernel a phase; where prefill's
# time goes under today's defaults (petal bench --profile: 512 / 4K / 16K
# tokens, decode at 4K); then the variant `oneload` (gemm.cu's load and
# load_late one body, every gemm family's PTX reordered) on cubins of its
# own PTX: the GEMM tests, and prefill of 512 / 4K / 16K tokens against
# main in ROUNDS (default 2) alternating rounds.
# From the repository root; $CARRY (default devrun/p3): cuda.test.xz and
# petals.txz (petal, petal-oneload) of main, ptx-oneload.txz,
# cuda-oneload.test.xz, made as variant-pack.sh makes a switch's (its
# commit a code change, not a switch: the one-load commit C, gemm.cu
# changed and gen.sh run on main, committed off any branch):
#   in a worktree of C: tar cJf ptx-oneload.txz ptx-oneload/ (its gemm,
#   gemm_wg, gemm_fit, gemm_downbf, gemm_fitw and gemm_ws PTX) and
#   go test -c its engine/cuda into cuda-oneload.test.xz; then
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/p3 petal=HEAD petal-oneload=C
# and the tree's PTX left out of the call but phase.ptx and the gemm
# families'. About 5 minutes. Logs in $OUT: logs.tgz, ptxas.tgz, sass.tgz
# (the cubins of phase and of oneload's families).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/p3}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
grep -q "^phase [a-z0-9_]* $(sha256sum engine/cuda/kernels/phase.ptx | cut -d' ' -f1) " /tmp/s1/manifest.txt || new_cubin /tmp/s1 phase $O
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_BENCH=1 timeout 120 $D/cuda.test -test.v \
  -test.run '^TestMeasurePhases$' > $O/phases.txt 2>&1)
echo "TestMeasurePhases: rc=$?"; grep -E 'µs a phase|left out|FAIL|phases,' $O/phases.txt | cut -c1-150
timeout 150 $D/petal bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 17000 \
  --prompt-lengths 512,4K,16K --context-lengths 4K --decode-tokens 16 --profile > $O/profile.txt 2>&1
echo "profile: rc=$?"; grep -A12 "^profile at 4K" $O/profile.txt | cut -c1-110
echo "part 1: $(( $(date +%s) - start )) s"
variant_cubins $D oneload $O
(cd /tmp && tar czf $O/sass.tgz s1/phase.* s1/manifest.txt s-oneload) && (cd $O && tar czf ptxas.tgz oneload ptxas-*.txt && rm -rf oneload ptxas-*.txt)
cuda_tests /tmp/s-oneload $D/cuda-oneload.test \
  'TestGEMMDenseMatchesReference|TestGEMMGroupSplitMatchesReference|TestMoEGroupedMatchesReference|TestGEMMProducerMatchesUndrained|TestTensorCoreOpsMatchReferences|TestCubinsLoad|TestDefaultsHaveCubins' $O/tests-oneload.txt
for round in $(seq 1 "${ROUNDS:-2}"); do
  for run in petal:s1 petal-oneload:s-oneload; do
    b=${run%%:*} s=${run#*:}
    PETAL_CUDA_SASS=/tmp/$s BENCH_LIMIT=60 bench_run $D/$b $O "$round-$b" cuda --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  done
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
