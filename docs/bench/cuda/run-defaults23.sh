#!/bin/bash
# run-defaults23.sh: router=i8wg the default, route_i8w.cu pruned to
# qgemm_i8_w and qgemm_i8_wg2, and GEMM_RA_STAGED_OUT on: route_i8w's
# cubin made first (sass.tgz), then on it and the tree's cubins
# (PETAL_CUDA_SASS=/tmp/s23) conformance under the defaults, the router,
# MoE and GEMM tests (tests.txt), the oracle under the defaults
# (oracle.txt), and prefill of 512 / 4K / 16K tokens with decode at 256
# and 4K under the defaults and router=i8 in ROUNDS (default 2) alternating
# rounds (rounds.tgz). From the repository root; $CARRY (default
# devrun/r23): cuda.test.xz and petals.txz (petal) of the change, the
# oracle's ref.txz; the tree's logs, results, tokenizer test data and PTX
# but route_i8w.ptx left out of the call. About 3 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/r23}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
rm -rf /tmp/s23 && cp -r engine/cuda/kernels/sass /tmp/s23
new_cubin /tmp/s23 route_i8w /tmp/s23
(cd /tmp && tar czf $O/sass.tgz s23/route_i8w.* s23/manifest.txt s23/ptxas-*.txt)
export PETAL_CUDA_SASS=/tmp/s23
cuda_tests /tmp/s23 $D/cuda.test \
  'TestConformance/default$|TestRouterShapesMatchI8|TestRouterTensorCoresMatchReference|TestMoEGroupedMatchesReference|TestMoEMatchesReference|TestGEMMDenseMatchesReference|TestCubinsLoad' $O/tests.txt
oracle_specs $D 'defaults' $O/oracle.txt
echo "tests: $(( $(date +%s) - start )) s"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for be in cuda cuda:router=i8; do
    BENCH_LIMIT=60 bench_run $D/petal $O "$round-$(tag_of $be)" $be --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256,4K --decode-tokens 16 --repeats 3 --floors=false
  done
done
(cd $O && tar czf rounds.tgz bench-* && rm -f bench-*)
echo "all: $(( $(date +%s) - start )) s"
