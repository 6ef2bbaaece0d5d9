#!/bin/bash
# run-cluster1.sh: thread-block clusters in the device layer (written, not
# yet run): Stream.LaunchCluster (cuLaunchKernelEx with the cluster
# dimension attribute, beside programmatic stream serialization) and
# kernels/cluster.h (the rank, the cluster barrier, distributed shared
# memory), checked by the driver's TestClusterLaunch on probe.cu's
# cluster_sum (clusters of 1-8 blocks, plain, programmatic and replayed
# from a graph) with the launch and graph tests beside it; then the
# cubins (probe.ptx changed: sass.tgz). Under a minute. From the
# repository root; devrun/cl holds driver.test.xz (CGO_ENABLED=0
# GOOS=linux GOARCH=amd64 go test -c -ldflags='-s -w' -o
# devrun/cl/driver.test ./engine/cuda/driver; xz -9).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/cl; mkdir -p "$O"
. docs/bench/cuda/lib.sh
(cd "$D" && xz -dc driver.test.xz > driver.test && chmod +x driver.test)
gpu_env "$O/env.txt"
cd $R/engine/cuda/driver
PETAL_CUDA_REQUIRE=1 timeout 120 $D/driver.test -test.v -test.run 'TestClusterLaunch|TestLaunchClusterRefusesBadShapes|TestLaunchAndGraphReplay|TestLaunchConfigLayout' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- |ok|FAIL|PASS)|panic|want' $O/tests.txt | head -20
cd $R
export PATH=$PATH:/usr/local/cuda/bin
sh engine/cuda/kernels/sass.sh "$O/sass" > "$O/sass.txt" 2>&1; echo "sass.sh: rc=$?"
(cd "$O" && tar czf sass.tgz sass && rm -rf sass)
