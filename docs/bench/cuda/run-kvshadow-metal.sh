#!/bin/bash
# run-kvshadow-metal.sh: the Metal sampler branch's tests through the CUDA
# dialect layer (engine/metal/cudarun's TestSample*, built from the branch
# wip/metal-sample-topk at 17a3a2b: devrun/ks/cudarun.test.xz), then
# run-kvshadow1.sh. From the repository root; carry devrun/ks.
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"
(cd devrun/ks && xz -dc cudarun.test.xz > cudarun.test && chmod +x cudarun.test)
cd engine/metal/cudarun
PETAL_CUDA_REQUIRE=1 timeout 120 $R/devrun/ks/cudarun.test -test.v -test.run 'TestSample|TestLogprobs' > $O/metal-sample.txt 2>&1
echo "metal sample tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic' $O/metal-sample.txt | head -20
cd $R && bash docs/bench/cuda/run-kvshadow1.sh
# attn_shadow's cubin for engine/cuda/kernels/sass (as sass.sh makes it; the
# manifest line is written from ptxas's version here).
P=/usr/local/cuda/bin/ptxas; K=engine/cuda/kernels
$P -arch=sm_90 -O3 $K/attn_shadow.ptx -o /tmp/attn_shadow.sm_90.cubin && gzip -9 -n -c /tmp/attn_shadow.sm_90.cubin > ${OUT:-/tmp/out}/attn_shadow.sm_90.cubin.gz
echo "attn_shadow sm_90 $(sha256sum $K/attn_shadow.ptx | cut -d' ' -f1) $($P --version | grep -o 'V[0-9][0-9.]*' | head -1)" > ${OUT:-/tmp/out}/sass-manifest-line.txt
