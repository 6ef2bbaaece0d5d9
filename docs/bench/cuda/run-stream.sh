#!/bin/bash
# run-stream.sh: gemm_stream (moe=stream) against the grouped MoE GEMMs it
# may replace: ptxas's resource report of the embedded gemm.ptx, the MoE
# GEMM tests, TestMeasureGEMM (every tile at 512 .. 4096 tokens), and the
# prefill of the 35B shape at 512 .. 4K tokens under moe=smem, reg and
# stream. devrun/gm holds cuda.test.gz and petal.gz (CGO_ENABLED=0
# GOOS=linux GOARCH=amd64, go test -c ./engine/cuda and go build .; gzip)
# and gemm.ptx. From the repository root.
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p $O; D=$R/devrun/gm
cd $D && gunzip -f cuda.test.gz petal.gz && chmod +x cuda.test petal
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
ptxas -arch=sm_90 -O3 -v -o /tmp/gemm.cubin gemm.ptx > $O/ptxas.txt 2>&1
grep -A1 -E "Compiling entry function '(gemm_gateup|gemm_down)_(s16|r32|m32)'" $O/ptxas.txt | grep -E "Compiling|Used|spill" | paste - - | sed 's/ptxas info    ://g' | cut -c1-200
export PETAL_CUDA_REQUIRE=1
cd $R/engine/cuda
${TESTS:+timeout 240 $D/cuda.test -test.v -test.run "$TESTS" > $O/tests.txt 2>&1}
[ -n "$TESTS" ] && grep -E '^(--- |ok|FAIL|PASS)|panic|s16' $O/tests.txt | cut -c1-300
[ -n "$MEASURE" ] && PETAL_CUDA_BENCH=1 timeout 200 $D/cuda.test -test.v -test.run 'TestMeasureGEMM' > $O/measure.txt 2>&1
[ -n "$MEASURE" ] && grep -E 'moe T=|s16' $O/measure.txt | cut -c1-300
cd $R
for m in ${MODES:-smem stream}; do
  timeout 120 $D/petal bench --backend cuda:moe=$m --synthetic qwen3.6-35b-a3b --max-context 8192 --prompt-lengths ${PROMPTS:-512,1K,2K,4K} --context-lengths 256 --decode-tokens 8 --repeats 3 --out $O/bench-$m.json > $O/bench-$m.txt 2>&1
  echo "moe=$m"; grep -E "^ +[0-9]+K? |rror" $O/bench-$m.txt | head -12
done
