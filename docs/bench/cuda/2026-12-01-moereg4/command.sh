# From the repository root, devrun/rbt holding cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c ./engine/cuda):
cd devrun/rbt && gunzip -f cuda.test.gz && chmod +x cuda.test && D=$(pwd) && cd ../../engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run 'TestGEMMTilesFit|TestMoEGroupedMatchesReference|TestTensorCoreOpsMatchReferences' > $OUT/tests.txt 2>&1
PETAL_CUDA_REQUIRE=1 PETAL_CUDA_BENCH=1 timeout 200 $D/cuda.test -test.v -test.run 'TestMeasureGEMM' > $OUT/measure.txt 2>&1
