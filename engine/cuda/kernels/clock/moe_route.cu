// clock/moe_route.cu: moe_route.cu with PETAL_MARK on (device.h), for
// measurements that read where its kernels' time goes
// (TestMeasureMoELayerClusterPhases); gen.sh makes clock/moe_route.ptx,
// which is read from disk, not embedded.
#define PETAL_CLOCK 1
#include "../moe_route.cu"
