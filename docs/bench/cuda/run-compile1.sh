#!/bin/bash
# run-compile1.sh: what a prompt length seen for the first time costs on
# the host (eager1: the first run of a prefill program 5-8 ms slower than
# the next, on the same GPU work). petal bench with verbose=on (each
# program's compile time, lowering and memory, in bench-*.txt) and a Go
# CPU profile of the whole run (PETAL_CPUPROFILE, cpu-*.prof) over prompts
# of 16 to 4K tokens, four runs a length, under the defaults and under
# graphs=off: where graphs pay at a few rows and where they do not. From
# the repository root; $CARRY (default devrun/my) holds petals.txz (petal,
# -tags nofixture). About 1 minute.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/my}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
runs() { python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
for r in d['results']:
    if 'prefill' in r: print('   ', r['length'], 'runs ms', [round(x*1e3,2) for x in r['prefill']['runs_seconds']], 'compile ms', [round(x*1e3,2) for x in r['prefill']['compile_runs_seconds']])
" "$1"; }
for be in cuda:verbose=on cuda:graphs=off,verbose=on; do
  tag=$(tag_of $be)
  PETAL_CPUPROFILE=$O/cpu-$tag.prof BENCH_LIMIT=100 bench_run $D/petal $O "$tag" $be --max-context 5000 \
    --prompt-lengths 16,64,256,512,1K,4K --context-lengths 256 --decode-tokens 4 --repeats 4 --floors=false > /dev/null
  echo "$be:"; runs $O/bench-$tag.json
  grep -E 'compiled a program' $O/bench-$tag.txt | sed -E 's/.*program of ([0-9]+) ops.* into ([0-9]+) kernels, (.*), in (.*)/\1 ops, \2 kernels, \4/' | sort | uniq -c | sort -rn | head -12
done
pack_out "$O"
