#!/bin/bash
# run-deq2.sh: the register-A GEMM tiles' k-step forms (gemm.cu's
# GEMM_RA_* switches) against each other, each build on cubins made here
# from its own PTX (/tmp/s1 .. /tmp/s4): v1 (6529228: code words read a
# k-step ahead but in w160rp), v2 (v1 with a k-tile's copies queued after
# its first products, GEMM_RA_LATE_LOAD), v3 (v1 with four fragment sets
# and a wait for the products two k-steps back in the 256-row tiles,
# GEMM_RA_DEEP), v4 (both); petal-old (17f8052) on its built-in cubins.
# v1's GEMM, MoE and tensor-core tests and conformance on its cubins;
# prefill of 512 / 4K / 16K tokens, three runs a length, in two alternating
# rounds. From the repository root; $CARRY (default devrun/d2) holds
# petals.txz (petal-old, petal-v1 .. petal-v4), cuda.test.xz (v1) and
# ptx-v2 .. ptx-v4 (each variant's gemm_wg, gemm_fit and gemm_downbf PTX);
# the tree (v1) may go without its logs and PTX but gemm_wg.ptx,
# gemm_fit.ptx and gemm_downbf.ptx. About 6 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/d2}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
mkdir -p $D/ptx-v1 && cp engine/cuda/kernels/{gemm_wg,gemm_fit,gemm_downbf}.ptx $D/ptx-v1/
for v in 1 2 3 4; do
  rm -rf /tmp/s$v && cp -r engine/cuda/kernels/sass /tmp/s$v
  for fam in gemm_wg gemm_fit gemm_downbf; do
    ptx=$D/ptx-v$v/$fam.ptx
    sed -i "/^$fam /d" /tmp/s$v/manifest.txt && rm -f /tmp/s$v/$fam.*.cubin.gz
    /usr/local/cuda/bin/ptxas -arch=sm_90a -O3 -v "$ptx" -o /tmp/s$v/$fam.sm_90a.cubin > $O/ptxas-v$v-$fam.txt 2>&1 &&
      gzip -9 -n -f /tmp/s$v/$fam.sm_90a.cubin &&
      echo "$fam sm_90a $(sha256sum "$ptx" | cut -d' ' -f1) $(/usr/local/cuda/bin/ptxas --version | grep -oE 'V[0-9.]+' | head -1)" >> /tmp/s$v/manifest.txt
    echo "v$v $fam: rc=$? spills: $(grep -oE '[0-9]+ bytes spill stores' $O/ptxas-v$v-$fam.txt | sort | uniq -c | tr '\n' ' ')"
  done
done
(cd /tmp && tar czf $O/sass.tgz s1/gemm_wg.sm_90a.cubin.gz s1/gemm_fit.sm_90a.cubin.gz s1/gemm_downbf.sm_90a.cubin.gz s1/manifest.txt)
cuda_tests /tmp/s1 $D/cuda.test "${TESTS:-TestGEMM|TestMoE|TestTensorCore|TestNormBF16|TestConformance}" $O/tests.txt
echo "tests: $(( $(date +%s) - start )) s"
for round in 1 2; do
  BENCH_LIMIT=60 bench_run $D/petal-old $O "$round-old" cuda --max-context 17000 \
    --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  for v in 1 2 3 4; do
    PETAL_CUDA_SASS=/tmp/s$v BENCH_LIMIT=60 bench_run $D/petal-v$v $O "$round-v$v" cuda --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  done
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
