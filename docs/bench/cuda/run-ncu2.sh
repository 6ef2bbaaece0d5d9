#!/bin/bash
# run-ncu2.sh: Nsight Compute's view of the prefill kernels furthest from
# their floors at 4096 tokens, one launch each: the MoE's gate/up and down
# on w160rp (TestMeasureGEMM: 46 launches of a tile a length, 512 / 1K / 2K
# first, so skip 140 is 4096 tokens), the delta rule's prep and tf32 state
# pass (TestMeasureDeltaForms: 6 launches at 512 rows, then 6 at 4096), and
# the dense q_proj on w256rp at 4096 rows (skip 23). NCU overrides the list
# (kernel:skip:test ...). From the repository root; $CARRY (default
# devrun/nb) holds cuda.test.xz; STALLS=1 adds the warps' stall reasons
# (cycles stalled per issued instruction) and the wgmma pipe's busy share.
# About 1 minute.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/nb}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
NCU=${NCU:-"gemm_gateup_w160rp:140:TestMeasureGEMM gemm_down_w160rp:140:TestMeasureGEMM gdn_chunk_state_tf32_sk:6:TestMeasureDeltaForms gdn_chunk_prep:6:TestMeasureDeltaForms gemm_dense_w256rp:23:TestMeasureGEMM"}
cd $R/engine/cuda
for spec in $NCU; do
  k=${spec%%:*}; rest=${spec#*:}; skip=${rest%%:*}; test=${rest#*:}
  PETAL_CUDA_BENCH=1 timeout ${NTIME:-100} ncu --kill yes --kernel-name $k --launch-skip $skip --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis \
    --section SchedulerStats --section ComputeWorkloadAnalysis --section LaunchStats ${SRC:+--section SourceCounters} \
    ${STALLS:+--metrics 'regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active'} \
    $D/cuda.test -test.run "^$test\$" > $O/ncu-$k-$skip.txt 2>&1
  echo "== $k (skip $skip, $test): rc=$?"
  [ -n "$STALLS" ] && grep -E "stalled|gmma|uniform" $O/ncu-$k-$skip.txt | awk '$NF+0 > 0.05' | sort -k3 -g -r | head -14
  grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Memory Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Eligible Warps|Achieved Occ|Registers Per|Warp Cycles Per Issued|Stall" $O/ncu-$k-$skip.txt | head -16
done
(cd $O && tar czf ncu.tgz ncu-*.txt && rm -f ncu-*.txt)
