#!/bin/bash
# run-stout2.sh: on the machine run-stout1.sh left warm, its carry: prefill
# of 512 / 4K / 16K tokens (three runs a length, decode 4 tokens at 256) of
# main and of the variant `stout` (gemm.cu's GEMM_RA_STAGED_OUT=1, its
# cubins remade as run-stout1.sh makes them), each under the default
# router and router=i8wg (route_i8w.cu's qgemm_i8_wg2, the fastest shape in
# router7's TestMeasureRouter), in ROUNDS (default 3) alternating rounds.
# Logs in $OUT: rounds.tgz.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/so}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
variant_cubins $D stout $O > /dev/null && rm -rf $O/stout
for round in $(seq 1 "${ROUNDS:-3}"); do
  for run in petal:s1:cuda petal-stout:s-stout:cuda petal:s1:cuda:router=i8wg petal-stout:s-stout:cuda:router=i8wg; do
    b=${run%%:*} rest=${run#*:}; s=${rest%%:*} be=${rest#*:}
    PETAL_CUDA_SASS=/tmp/$s BENCH_LIMIT=60 bench_run $D/$b $O "$round-$b-$(tag_of $be)" $be --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  done
done
echo "all: $(( $(date +%s) - start )) s"
(cd $O && tar czf rounds.tgz bench-* && rm -f bench-*)
