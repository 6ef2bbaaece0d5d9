// clock/gdn_layer.cu: gdn_layer.cu with PETAL_MARK on (device.h), for
// measurements that read where its launch's time goes
// (TestMeasureGDNLayerPhases); gen.sh makes clock/gdn_layer.ptx, which is
// read from disk, not embedded.
#define PETAL_CLOCK 1
#include "../gdn_layer.cu"
