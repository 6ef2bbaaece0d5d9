#!/bin/bash
# From the repository root on the GPU machine, devrun/ml/cuda.test.gz built with
# CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -ldflags='-s -w' ./engine/cuda
cd devrun/ml && gunzip -f cuda.test.gz && chmod +x cuda.test && cd ../../engine/cuda &&
	PETAL_CUDA_REQUIRE=1 PETAL_CUDA_BENCH=1 ../../devrun/ml/cuda.test -test.v -test.run 'TestMeasureMoELayerPhases' 2>&1 | tee $OUT/phases.txt
