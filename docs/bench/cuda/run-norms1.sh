#!/bin/bash
# run-norms1.sh: normf32=lean and normbf=moe against the defaults in
# alternating rounds (prefill of 512 / 4K / 16K tokens, three runs a
# length), as the fourteenth report's ablation left them within its noise.
# From the repository root, on the machine run-report21.sh left warm
# ($CARRY, default devrun/r21, unpacked). About 2 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/r21}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
[ -x $D/petal ] || (cd "$D" && tar xJf petals.txz)
start=$(date +%s)
for round in $(seq 1 "${ROUNDS:-3}"); do
  for be in cuda cuda:normf32=lean cuda:normf32=lean,normbf=moe; do
    BENCH_LIMIT=40 bench_run $D/petal $O "$round-$(tag_of $be)" $be --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  done
done
echo "all: $(( $(date +%s) - start )) s"
(cd $O && tar czf norms1.tgz bench-* && rm -f bench-*)
