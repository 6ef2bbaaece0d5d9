#!/bin/bash
# run-pdltrig2.sh: run-pdltrig1.sh's measurement in a shorter call, its
# kernels no longer on main (e3faf30 went back to c8c01a2's until they are
# measured): 91116bc's PTX (no kernel lets the next launch at its start;
# pdl_trigger before a last block's tail, else the blocks' retiring) made
# into cubins here, then decode at 4K and 32K (prompt 512) under pdl=on and
# pdl=some with that build, and main's (c8c01a2) under its default beside
# it, in two alternating rounds. From the repository root; devrun/pt holds
# petal.xz (91116bc), petal-main.xz (c8c01a2), both -tags nofixture, and
# kernels.txz (91116bc's engine/cuda/kernels/*.ptx and sass.sh). Logs in
# $OUT (bench.tgz, sass.tgz: the cubins of 91116bc's PTX).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/pt; mkdir -p "$O" /tmp/k /tmp/b
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
(cd "$D" && xz -dc petal-main.xz > petal-main && chmod +x petal-main)
tar xJf "$D/kernels.txz" -C /tmp/k
gpu_env "$O/env.txt"
s=$(date +%s)
PATH=$PATH:/usr/local/cuda/bin sh /tmp/k/sass.sh /tmp/sass > $O/sass.txt 2>&1
echo "sass.sh: rc=$? in $(( $(date +%s) - s )) s"
for round in 1 2; do
  BENCH_LIMIT=60 bench_run "$D/petal-main" /tmp/b "$round-main-some" cuda --max-context 40000 --prompt-lengths 512 \
    --context-lengths 4K,32K --decode-tokens 64 --floors=false
  for be in cuda:pdl=on cuda; do
    PETAL_CUDA_SASS=/tmp/sass BENCH_LIMIT=60 bench_run "$D/petal" /tmp/b "$round-$(tag_of $be)" $be --max-context 40000 \
      --prompt-lengths 512 --context-lengths 4K,32K --decode-tokens 64 --floors=false
  done
  tar czf $O/bench.tgz -C /tmp/b .
done
(cd /tmp && tar czf $O/sass.tgz sass)
