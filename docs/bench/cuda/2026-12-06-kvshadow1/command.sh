#!/bin/bash
# From the repository root on the GPU machine (an H100 came), carry ["devrun/ks"]:
# cuda.test.xz and petal.xz of 5724255 (-tags nofixture), and cudarun.test.xz
# built from the branch wip/metal-sample-topk at 17a3a2b
# (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c ./engine/metal/cudarun).
bash docs/bench/cuda/run-kvshadow-metal.sh
