#!/bin/bash
# run-profile2.sh: where the time goes under today's defaults, for the next
# kernels: the kernel trace of run-ktrace.sh (every kernel of the replayed
# graphs: prefill of 512 and 4K tokens, decode at a 4K context), then
# petal bench --profile (op families by layer kind) at 512 / 4K / 16K
# tokens of prefill and decode at 4K. About 3 minutes. From the repository
# root; devrun/kt/petal.xz as run-ktrace.sh says (its PETAL).
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
gpu_env "$O/env.txt"
PETAL=$R/devrun/kt/petal bash docs/bench/cuda/run-ktrace.sh
timeout 200 $R/devrun/kt/petal bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 17000 \
  --prompt-lengths 512,4K,16K --context-lengths 4K --decode-tokens 16 --profile > $O/profile.txt 2>&1
echo "profile: rc=$?"; grep -A16 "^profile at" $O/profile.txt | head -90
