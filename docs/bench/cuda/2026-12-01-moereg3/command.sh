# From the repository root, devrun/rbt holding cuda.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c ./engine/cuda):
cd devrun/rbt && gunzip -f cuda.test.gz && chmod +x cuda.test && D=$(pwd) && cd ../../engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run 'TestGEMMTilesFit|TestMoEGroupedMatchesReference|TestTensorCoreOpsMatchReferences' > $OUT/tests.txt 2>&1
PETAL_CUDA_REQUIRE=1 PETAL_CUDA_BENCH=1 timeout 200 $D/cuda.test -test.v -test.run 'TestMeasureGEMM' > $OUT/measure.txt 2>&1
# the profiles (ncu-m32.txt, ncu-r32.txt), each its own call:
ncu --kernel-name regex:'gemm_gateup_(m32|r32)' --launch-count 2 --section SpeedOfLight --section WarpStateStats --section Occupancy \
	--section MemoryWorkloadAnalysis --section SchedulerStats --section ComputeWorkloadAnalysis $D/cuda.test -test.run TestMeasureGEMM > $OUT/ncu.txt 2>&1
ncu --kernel-name gemm_gateup_r32 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy \
	--section MemoryWorkloadAnalysis --section SchedulerStats --print-details all $D/cuda.test -test.run TestMeasureGEMM > $OUT/ncu3.txt 2>&1
