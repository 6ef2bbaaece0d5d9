#!/bin/bash
# run-lazy1.sh: whether what is left of a prompt length's first Prepare with
# the pool (prep2: 1.5 ms of lowering blocked off the CPU) is the driver
# loading each kernel's code on its first use (CUDA's lazy loading).
# petal bench over 40 prompt lengths each seen once (100 to 4000 tokens),
# one run each, in alternating processes with CUDA_MODULE_LOADING unset and
# =EAGER, two rounds; the sums of their first Prepare and first runs, and
# the time petal run takes on the checkout's tiny model either way. From
# the repository root; $CARRY (default devrun/pp2) holds petals.txz
# (petal, -tags nofixture). About a minute.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/pp2}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
lengths=$(seq -s, 100 100 4000)
sums() { python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
c=[r['prefill']['compile_seconds']*1e3 for r in d['results'] if 'prefill' in r]
t=[r['prefill']['seconds']*1e3 for r in d['results'] if 'prefill' in r]
print('    prepare ms: sum %.1f (min %.2f, max %.2f); prefill ms sum %.1f; load %.2f s' % (sum(c), min(c), max(c), sum(t), d['load_seconds']))
" "$1"; }
for round in 1 2; do
  for mode in lazy EAGER; do
    if [ $mode = EAGER ]; then export CUDA_MODULE_LOADING=EAGER; else unset CUDA_MODULE_LOADING; fi
    BENCH_LIMIT=100 bench_run $D/petal $O "$round-$mode" cuda --max-context 4200 --prompt-lengths $lengths \
      --context-lengths 256 --decode-tokens 2 --floors=false > /dev/null
    echo "$mode round $round:"; sums $O/bench-$round-$mode.json
    s=$(date +%s.%N); timeout 60 $D/petal run --model fixtures/tiny-qwen36-moe-4bit --backend cuda --max-tokens 8 "Hi" > /dev/null 2>&1
    echo "    petal run (tiny model): rc=$?, $(awk "BEGIN{print $(date +%s.%N) - $s}") s"
  done
done
unset CUDA_MODULE_LOADING
pack_out "$O"
