#!/bin/bash
# From the repository root at 8a94ce0 (gemm_ws.cu: w256rs's producer three k-tiles ahead, its
# consumers arriving at the empty barriers once a warp), without a GPU, with CUDA 12.4's ptxas
# (engine/cuda/kernels/regs.sh says how to get it); a guide, not the GPU machine's 13.0:
P=/tmp/ctk12/usr/bin/ptxas; d=docs/bench/cuda/2026-12-07-ptxas124b
PTXAS=$P sh engine/cuda/kernels/regs.sh gemm_ws > $d/regs-gemm_ws.txt 2>&1
$P -arch=sm_90a -O3 -v engine/cuda/kernels/gemm_ws.ptx -o /tmp/ws.cubin > $d/ptxas-gemm_ws.txt 2>&1
echo "C75xx notes: $(grep -c 'C75[0-9][0-9]' $d/ptxas-gemm_ws.txt)" > $d/summary.txt
# the consumers' arrival, predicated (@P) rather than branched around
$(dirname $P)/cuobjdump -sass -fun gemm_dense_w256rs /tmp/ws.cubin | grep 'SYNCS.ARRIVE' >> $d/summary.txt
