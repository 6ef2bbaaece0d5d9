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
