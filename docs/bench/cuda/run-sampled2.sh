#!/bin/bash
# run-sampled2.sh: the top-k fast path of sample.cu (sample_prep's blocks
# each leave their k best keys, sample_row sorts their union and does the
# host's arithmetic over the k best; written, not yet run): the sample
# tests against engine/sample's host kernel (TestSampleFullVocabulary at
# the 35B vocabulary under both samplers, conformance's sample cases),
# then decode, then the cubins (sample.ptx
# changed; sass.tgz). Decode: greedy, the model's defaults under
# sampler=row (the default) and sampler=topk, and top-k 64 under topk, two
# rounds. About 3 minutes. From the repository root; devrun/s2
# holds cuda.test.xz and petal.xz as run-pipe.sh says.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/s2; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 120 $D/cuda.test -test.v -test.run 'TestSample|TestConformance' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | head -20; grep -E -- '--- FAIL|differ|want' $O/tests.txt | head -20
cd $R
for round in 1 2; do
  i=0
  for run in "cuda|" "cuda|--temperature 0.6 --top-k 20 --top-p 0.95" "cuda:sampler=topk|--temperature 0.6 --top-k 20 --top-p 0.95" \
    "cuda:sampler=topk|--temperature 0.6 --top-k 64 --top-p 0.95"; do
    i=$((i + 1))
    bench_run "$D/petal" "$O" "$round-s$i" "${run%%|*}" --max-context 17000 --prompt-lengths 512 --context-lengths 256,4K,16K \
      --decode-tokens 64 --floors=false ${run#*|}
    grep -E '^decode:' "$O/bench-$round-s$i.txt" | cut -c1-150
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
export PATH=$PATH:/usr/local/cuda/bin
sh engine/cuda/kernels/sass.sh "$O/sass" > "$O/sass.txt" 2>&1; echo "sass.sh: rc=$?"
(cd "$O" && tar czf sass.tgz sass && rm -rf sass)
