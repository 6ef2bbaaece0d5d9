#!/bin/bash
# run-prep1.sh: where a prompt length's first Prepare goes on the host
# (compile1: 6.5-10.5 ms at 512-4K tokens, the backend's compile 1.6-4.6
# of it). petal bench over 40 prompt lengths each seen once (100 to 4000
# tokens), one run each, verbose=on, with a Go CPU profile sampled 2,000
# times a second (PETAL_CPUPROFILE_HZ): about 400 ms of Prepare in all.
# From the repository root; $CARRY (default devrun/pp) holds petals.txz
# (petal, -tags nofixture). Under a minute.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/pp}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
lengths=$(seq -s, 100 100 4000)
PETAL_CPUPROFILE=$O/cpu.prof PETAL_CPUPROFILE_HZ=2000 BENCH_LIMIT=150 bench_run $D/petal $O prep cuda:verbose=on \
  --max-context 4200 --prompt-lengths $lengths --context-lengths 256 --decode-tokens 2 --floors=false > /dev/null
echo "bench: rc=$?"
python3 -c "
import json
d=json.load(open('$O/bench-prep.json'))
c=[r['prefill']['compile_seconds']*1e3 for r in d['results'] if 'prefill' in r]
t=[r['prefill']['seconds']*1e3 for r in d['results'] if 'prefill' in r]
print('prepare ms: sum %.1f, min %.2f, max %.2f; prefill ms sum %.1f' % (sum(c), min(c), max(c), sum(t)))
"
grep -c 'compiled a program' $O/bench-prep.txt
pack_out "$O"
