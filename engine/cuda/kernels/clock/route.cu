// clock/route.cu: route.cu with PETAL_MARK on (device.h), for measurements that
// read where its kernels' time goes (TestMeasureDecodePhases); gen.sh makes
// clock/route.ptx, which is read from disk, not embedded.
#define PETAL_CLOCK 1
#include "../route.cu"
