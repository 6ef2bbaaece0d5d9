#!/bin/bash
# run-stream.sh: the prefill kernels behind moe=stream, linears=group and
# attn=wide checked and measured in one call: ptxas's resource report of
# the embedded gemm.ptx, the tests named by TESTS, the measurements named
# by MEASURE (TestMeasureGEMM: every MoE tile at 512 .. 4096 tokens;
# TestMeasureFlash: both flash kernels at 0 .. 124K), the prefill of the
# 35B shape under each of SPECS (BINARY:BACKEND) at PROMPTS, and with
# NCU=1 a profile of s16; PTXAS_RE picks the kernels whose registers are
# shown (ptxas.txt has all). From the repository root, devrun/gm holding
# cuda.test.gz, petals.txz and gemm.ptx, made here by:
#   mkdir -p devrun/gm /tmp/bins
#   CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -ldflags='-s -w' -o devrun/gm/cuda.test ./engine/cuda
#   gzip devrun/gm/cuda.test; cp engine/cuda/kernels/gemm.ptx devrun/gm/
#   CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags='-s -w' -o /tmp/bins/petal .
#   git worktree add --detach /tmp/wt-old 4f3d75a   # the build before these kernels
#   (cd /tmp/wt-old && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags='-s -w' -o /tmp/bins/petal-old .)
#   XZ_OPT='-9 -T4' tar cJf devrun/gm/petals.txz -C /tmp/bins .
# and the call (about 8 minutes):
#   TESTS='TestGEMM|TestMoEGrouped|TestMoERoute|TestTensorCoreOpsMatchReferences|TestConformance|TestFlash|TestParse' \
#   MEASURE='TestMeasureGEMM|TestMeasureFlash' MAXCTX=40000 PROMPTS=512,1K,4K,32K \
#   SPECS="petal-old:cuda petal:cuda:linears=group petal:cuda:moe=stream,linears=group petal:cuda:moe=stream,linears=group,attn=wide" \
#   bash docs/bench/cuda/run-stream.sh
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p $O; D=$R/devrun/gm
cd $D && gunzip -f cuda.test.gz && chmod +x cuda.test && tar xJf petals.txz
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
ptxas -arch=sm_90 -O3 -v -o /tmp/gemm.cubin $R/engine/cuda/kernels/gemm.ptx > $O/ptxas.txt 2>&1
grep -A1 -E "Compiling entry function '${PTXAS_RE:-(gemm_gateup|gemm_down)_(s16|r32|m32)}'" $O/ptxas.txt | grep -E "Compiling|Used|spill" | paste - - | sed 's/ptxas info    ://g' | cut -c1-200
export PETAL_CUDA_REQUIRE=1
cd $R/engine/cuda
[ -n "$TESTS" ] && timeout ${TTIME:-240} $D/cuda.test -test.v -test.run "$TESTS" > $O/tests.txt 2>&1
[ -n "$TESTS" ] && grep -E '^(--- |ok|FAIL|PASS)|panic|s16' $O/tests.txt | cut -c1-300
[ -n "$MEASURE" ] && PETAL_CUDA_BENCH=1 timeout 260 $D/cuda.test -test.v -test.run "$MEASURE" > $O/measure.txt 2>&1
[ -n "$MEASURE" ] && grep -E 'moe T=|s16|flash ' $O/measure.txt | cut -c1-300
cd $R
for spec in ${SPECS:-petal:cuda petal:cuda:moe=stream}; do
  bin=${spec%%:*}; be=${spec#*:}; f=$(echo "$spec" | tr ':=,' '_._')
  timeout 120 $D/$bin bench --backend $be --synthetic qwen3.6-35b-a3b --max-context ${MAXCTX:-8192} --prompt-lengths ${PROMPTS:-512,1K,2K,4K} --context-lengths 256 --decode-tokens 8 --repeats 3 --out $O/bench-$f.json > $O/bench-$f.txt 2>&1
  echo "$spec"; grep -E "^ +[0-9]+K? |rror" $O/bench-$f.txt | head -12
done
# at most 8 files come back from $OUT: the benches' in one archive
(cd $O && ls bench-* >/dev/null 2>&1 && tar czf bench.tgz bench-* && rm -f bench-*)
# NCU=1: a profile of the first gate/up and the first down launch of s16 (TestMeasureGEMM's 512 tokens).
for k in ${NCU:+gateup down}; do
  (cd $R/engine/cuda && PETAL_CUDA_BENCH=1 timeout 240 ncu --kernel-name gemm_${k}_s16 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section Occupancy --section MemoryWorkloadAnalysis --section SchedulerStats --section ComputeWorkloadAnalysis \
    $D/cuda.test -test.run TestMeasureGEMM > $O/ncu-$k.txt 2>&1)
  grep -E "Duration|DRAM Throughput|Memory Throughput|Issue Slots|Eligible Warps|Stall (Wait|Long|Short|Barrier|Math|Not Sel)|Achieved Occ|Registers Per" $O/ncu-$k.txt | head -20
done
