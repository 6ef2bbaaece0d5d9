#!/bin/bash
# run-normbf1.sh: normbf=on (norm_bf.cu: a prompt chunk's input norm and
# gated norm writing the bf16 copy of their output for the next GEMM, no
# gemm_to_bf16) on its first run. ptxas makes its cubin, and gemm_downbf's
# again, into a copy of the built-in ones (/tmp/s1, kept in sass.tgz); on those cubins
# TestNormBF16MatchesApart (bit for bit against the ops apart),
# TestTensorCoreOpsMatchReferences, conformance under every variant and
# TestPool* (the pool's mends of f77a92e); the oracle under
# normbf=on; prefill of 512 / 4K / 16K tokens, three runs a length, under
# the defaults and normbf=on in two alternating rounds. From the
# repository root; $CARRY (default devrun/nb) holds petals.txz (petal,
# -tags nofixture), cuda.test.xz and ref.txz; the tree may go without its
# logs and PTX but norm_bf.ptx and gemm_downbf.ptx. About 2 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/nb}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
new_cubin /tmp/s1 norm_bf $O
new_cubin /tmp/s1 gemm_downbf $O  # its PTX changed with combine_rows, its cubin taken out until remade
(cd /tmp && tar czf $O/sass.tgz s1/norm_bf.sm_90.cubin.gz s1/gemm_downbf.sm_90a.cubin.gz s1/manifest.txt)
cuda_tests /tmp/s1 $D/cuda.test "${TESTS:-TestNormBF16MatchesApart|TestTensorCoreOpsMatchReferences|TestConformance|TestPool}" $O/tests.txt
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s1 PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 100 $D/cuda.test -test.v \
  -test.run 'TestOracleOnGPU/normbf=on$' > $O/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -3; grep -E 'top-1' $O/oracle.txt | cut -c1-200 | head -5
echo "tests: $(( $(date +%s) - start )) s"
for round in 1 2; do
  for be in cuda cuda:normbf=on; do
    PETAL_CUDA_SASS=/tmp/s1 BENCH_LIMIT=60 bench_run $D/petal $O "$round-$(tag_of $be)" $be --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  done
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
