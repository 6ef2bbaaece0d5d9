# From the repository root on the GPU machine (an H100), devrun/ml carried
# (cuda.test.gz built at 43f4c98: gemm=wg the default, w64o added; ref.txz):
TESTS='TestGEMMDense|TestMoEGrouped|TestGEMMTilesFit|TestGEMMWGModule|TestOracleOnGPU|TestConformance' \
  MEASURE='TestMeasureGEMM' NCU='dense_w128o:23' bash docs/bench/cuda/run-split.sh
