#!/bin/bash
# run-hostprof.sh: a Go CPU profile (PETAL_CPUPROFILE) of petal bench over
# eight prompt lengths from 384 to 1280 tokens, one run each (each a first
# run: its programs lowered and launched kernel by kernel), then three runs
# at 512 and 1K with verbose=on (first run, capture, replay). For where a
# first run's host time goes: go tool pprof -top -focus 'engine/cuda' the
# profile. From the repository root; devrun/report3/petals.txz as
# run-report12.sh says. About 2 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; B=$R/devrun/report3; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd $B && tar xJf petals.txz)
gpu_env "$O/env.txt"
PETAL_CPUPROFILE=$O/cpu.pprof timeout 150 $B/petal bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 4096 \
  --prompt-lengths 384,512,640,768,896,1024,1152,1280 --context-lengths 256 --decode-tokens 4 --repeats 1 \
  --out $O/bench-prof.json > $O/bench-prof.txt 2>&1
echo "profiled: rc=$?"; grep -E '^ +[0-9]+K? ' $O/bench-prof.txt
timeout 100 $B/petal bench --backend cuda:verbose=on --synthetic qwen3.6-35b-a3b --max-context 4096 --prompt-lengths 512,1K \
  --context-lengths 256 --decode-tokens 4 --repeats 3 --out $O/bench-runs.json > $O/bench-runs.txt 2>&1
echo "runs: rc=$?"; grep -E '^ +[0-9]+K? ' $O/bench-runs.txt; grep 'compiled a program' $O/bench-runs.txt | tail -6 | cut -c1-200
