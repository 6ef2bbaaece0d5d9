#!/bin/bash
# run-ncu.sh: Nsight Compute's view of single kernel launches of the
# measurement tests, one report file each (at most 7 come back beside
# env.txt). NCU lists them as kernel:skip:test (the launch skip+1 of the
# kernel named exactly, in the PETAL_CUDA_BENCH test named); with SRC=1 the
# source counters too (the stall reasons by instruction). From the
# repository root; devrun/ml (or $DEVRUN) holds cuda.test.gz (CGO_ENABLED=0 GOOS=linux
# GOARCH=amd64 go test -c -ldflags='-s -w' ./engine/cuda; gzip). Launch
# counts: TestMeasureGEMM times a launch 23 times, the dense GEMMs at 512
# then 4096 rows (skip 23: q_proj at 4096), each MoE tile's gate/up and
# down 46 times a length (512, 1024, 2048, 4096: gateup skip 138 is 4096
# tokens); TestMeasureDeltaForms runs each form 6 times at 512 then 4096
# tokens (gdn_chunk_state_ilp skip 6 is 4096; gdn_chunk_prep skip 18 is the
# ILP form's 4096).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${DEVRUN:-devrun/ml}; mkdir -p "$O"
(cd $D && gunzip -f cuda.test.gz && chmod +x cuda.test)
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
cd $R/engine/cuda
for spec in $NCU; do
  k=${spec%%:*}; rest=${spec#*:}; skip=${rest%%:*}; test=${rest#*:}
  PETAL_CUDA_BENCH=1 timeout ${NTIME:-90} ncu --kill yes --kernel-name $k --launch-skip $skip --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis \
    --section SchedulerStats --section ComputeWorkloadAnalysis --section LaunchStats ${SRC:+--section SourceCounters} \
    $D/cuda.test -test.run "^$test\$" > $O/ncu-$k-$skip.txt 2>&1
  echo "== $k (skip $skip, $test): rc=$?"
  grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Memory Throughput|Issue Slots Busy|Eligible Warps|Achieved Occ|Registers Per|Stall|Warp Cycles Per Issued" $O/ncu-$k-$skip.txt | head -14
done
