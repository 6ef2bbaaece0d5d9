# From the repository root, devrun/rbt/metal.test.gz built from wip/metal-route-keys (go test -c ./engine/metal/cudarun):
cd devrun/rbt && gunzip -f metal.test.gz && chmod +x metal.test && D=$(pwd)
cd /tmp && PETAL_CUDA_REQUIRE=1 timeout 200 $D/metal.test -test.v > $OUT/metal.txt 2>&1
