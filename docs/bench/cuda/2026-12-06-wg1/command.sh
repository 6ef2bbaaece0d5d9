# From the repository root on the GPU machine (an H100), devrun/ml carried
# (cuda.test.gz built at 308e57f, ref.txz):
TESTS='TestGEMMDense|TestMoEGrouped|TestGEMMTilesFit|TestGEMMWGModule' MEASURE='TestMeasureGEMM' \
  NCU='dense_m128:23 dense_w128:23' bash docs/bench/cuda/run-split.sh
