#!/bin/bash
# run-wgr.sh: the register-A wgmma tiles (w64r, w128r, w256r) and the delta
# rule's gdn_chunk_state_sk2 checked and timed: the GEMM and chunked-delta
# tests (TESTS), TestMeasureGEMM (every tile) and TestMeasureDeltaForms
# (every state kernel), ncu of q_proj at 4096 rows on w128o2, w128r and
# w256r (NCU), then prefill with gemm=wg and gemm=wgr alternating, two
# rounds. From the
# repository root; devrun/wr holds cuda.test.gz (CGO_ENABLED=0 GOOS=linux
# GOARCH=amd64 go test -c -ldflags='-s -w' ./engine/cuda; gzip) and
# petal.xz (go build the same way; xz -9). About 5 minutes. The oracle
# (TestOracleOnGPU runs gemm=wgr) needs ref.txz beside them, which does not
# fit the carry with petal: run-split.sh runs it.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/wr; mkdir -p "$O"
cd $D && gunzip -f cuda.test.gz && chmod +x cuda.test && xz -dc petal.xz > petal && chmod +x petal
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run "${TESTS:-TestGEMMDense|TestMoEGrouped|TestGEMMTilesFit|TestGEMMWGModule|TestChunkedDelta}" > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/tests.txt | head
PETAL_CUDA_BENCH=1 timeout 180 $D/cuda.test -test.v -test.run 'TestMeasureGEMM|TestMeasureDeltaForms' > $O/measure.txt 2>&1
grep -E 'registers|dense .*M=4096|skew 0.0 (w128o2|w128r|w256r|w64o|w64r) ' $O/measure.txt | sed 's/.*gemm_test.go:[0-9]*: //' | grep -E 'w64r|w128r|w256r|M=4096|skew' | cut -c1-260
grep -E 'delta rule' $O/measure.txt
for ks in ${NCU:-dense_w128o2:23 dense_w128r:23 dense_w256r:23}; do
  k=${ks%%:*}; skip=${ks#*:}
  PETAL_CUDA_BENCH=1 timeout 90 ncu --kill yes --kernel-name gemm_$k --launch-skip $skip --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    $D/cuda.test -test.run TestMeasureGEMM > $O/ncu-$k.txt 2>&1
  echo "== $k"; grep -E "Duration|Issue Slots Busy|Eligible Warps|Mem Busy|Achieved Occ|Registers Per" $O/ncu-$k.txt | head -8
done
(cd $O && ls ncu-* >/dev/null 2>&1 && tar czf ncu.tgz ncu-* && rm -f ncu-*)
cd $R
for round in 1 2; do
  for be in cuda cuda:gemm=wgr; do
    f=bench-$round-$(echo $be | tr ':=' '_.')
    timeout 100 $D/petal bench --backend $be --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths 512,1K,4K,16K \
      --context-lengths 256 --decode-tokens 8 --repeats 3 --out $O/$f.json > $O/$f.txt 2>&1
    echo "$be round $round: rc=$?"; grep -E '^ +[0-9]+K? ' $O/$f.txt
  done
done
(cd $O && tar czf benches.tgz bench-* && rm -f bench-*)
