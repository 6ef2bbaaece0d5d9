// clock/qmv.cu: qmv.cu with PETAL_MARK on (device.h), for measurements that
// read where a mat-vec's time goes (TestMeasureDecodePhases); gen.sh makes
// clock/qmv.ptx, which is read from disk, not embedded.
#define PETAL_CLOCK 1
#include "../qmv.cu"
